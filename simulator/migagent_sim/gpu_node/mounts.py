"""Enter a private mount namespace in which a node's files (files.py) sit at the paths the tools read.

`python -m migagent_sim.gpu_node.mounts SCRATCH LIBRARY -- COMMAND...` unshares the mount namespace
(so nothing here is seen outside this process and its children), writes the node's files for the
GPUs in SCRATCH/gpus.json onto a tmpfs at SCRATCH/tree (a thousand small files: fast there, and
nothing left on disk), then lays them over the fixed paths:

* `/dev`: an overlay of TREE/dev on the host's /dev (the submounts under /dev are put back);
* `/sys/bus/pci/devices`: a tmpfs holding the host's entries and the simulated GPUs;
* `/proc`: a tmpfs holding a symlink to each of the host's entries (through a bind mount of the
  real /proc, so `/proc/self` still names the reader) and TREE/proc's files; `/proc/devices` gets
  the driver's devices. procfs cannot be overlaid, and `/proc/modules` may not exist at all (a
  kernel without modules), so it is rebuilt rather than covered file by file.

then execs COMMAND. This module imports nothing from migagent: it runs once per node.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
from pathlib import Path

from migagent_sim.gpu_node.devices import proc_devices
from migagent_sim.gpu_node.files import load_facts, write_tree

CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE, MS_RDONLY = 0x1000, 0x4000, 0x40000, 0x1

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _encoded(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


def mount(source: str, target: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    result = _libc.mount(_encoded(source), _encoded(target), _encoded(fstype), ctypes.c_ulong(flags), _encoded(data))
    _check(result, f"mount {source} on {target}")


def _submounts(prefix: str) -> list[str]:
    """Mount points strictly under `prefix`, outermost first (/proc/self/mountinfo field 5)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines():
        point = line.split()[4].encode().decode("unicode_escape")  # octal escapes: \040 is a space
        if point.startswith(prefix + "/"):
            found.append(point)
    return sorted(set(found), key=lambda p: p.count("/"))


def overlay_dev(tree: Path) -> None:
    """A submount may be a file: in a pod, the kubelet binds /dev/termination-log."""
    kept = tree / "kept-dev-mounts"
    kept.mkdir()
    submounts = _submounts("/dev")
    for number, point in enumerate(submounts):
        target = kept / str(number)
        if Path(point).is_dir():
            target.mkdir()
        else:
            target.touch()
        mount(point, str(target), flags=MS_BIND | MS_REC)
    mount("overlay", "/dev", "overlay", MS_RDONLY, f"lowerdir={tree / 'dev'}:/dev")
    for number, point in enumerate(submounts):
        if Path(point).exists():
            mount(str(kept / str(number)), point, flags=MS_BIND | MS_REC)


def cover_pci_devices(tree: Path) -> None:
    host = Path("/sys/bus/pci/devices")
    entries = {entry.name: os.readlink(entry) for entry in host.iterdir()} if host.is_dir() else {}
    mount("migagent-pci", str(host), "tmpfs", 0, "mode=755")
    for name, target in entries.items():
        (host / name).symlink_to(target)  # relative to /sys/bus/pci/devices, as the kernel's are
    for device in (tree / "sys/bus/pci/devices").iterdir():
        (host / device.name).symlink_to(device)


def cover_proc(tree: Path) -> None:
    real = tree / "host-proc"
    real.mkdir()
    mount("/proc", str(real), flags=MS_BIND | MS_REC)
    devices = proc_devices((real / "devices").read_text(encoding="ascii"))
    mount("migagent-proc", "/proc", "tmpfs", 0, "mode=755")
    _merge(real, tree / "proc", Path("/proc"))
    (Path("/proc") / "devices").unlink(missing_ok=True)
    (Path("/proc") / "devices").write_text(devices, encoding="ascii")


def _merge(host: Path, ours: Path, target: Path) -> None:
    """`target` (an empty directory): our files, and a symlink to each host entry we do not have;
    a directory both have is merged the same way. Numbered (process) entries are left to /proc/self."""
    for entry in ours.iterdir():
        if entry.is_dir():
            (target / entry.name).mkdir()
            _merge(host / entry.name, entry, target / entry.name)
        else:
            shutil.copyfile(entry, target / entry.name)
    if not host.is_dir():
        return
    for entry in host.iterdir():
        if not entry.name.isdigit() and not (target / entry.name).exists():
            (target / entry.name).symlink_to(entry)


def enter(scratch: Path, library: Path, command: list[str]) -> None:
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    mount("none", "/", None, MS_REC | MS_PRIVATE)  # nothing mounted from here on reaches the host
    tree = scratch / "tree"
    tree.mkdir()
    mount("migagent-gpu-node", str(tree), "tmpfs", 0, "mode=755")
    write_tree(tree, load_facts(scratch / "gpus.json"), library_dir=library)
    overlay_dev(tree)
    cover_pci_devices(tree)
    cover_proc(tree)
    os.execvp(command[0], command)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m migagent_sim.gpu_node.mounts SCRATCH LIBRARY -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    try:
        enter(Path(argv[0]), Path(argv[1]), argv[3:])
    except OSError as exc:
        print(f"gpu_node: cannot set up the simulated node's files: {exc}", file=sys.stderr)
        return 1
    return 0  # not reached: enter execs


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
