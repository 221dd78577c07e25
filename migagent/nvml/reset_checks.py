"""What blocks `nvidia-smi -r` on a node, checked before a reset, each with its own reason and fix.

`nvidia-smi -r` refuses a GPU someone holds, and says only "in use". The usual holders on a MIG
node are known (mig-parted's README and issues): a loaded `nvidia_drm` module (mig-parted#181,
workaround `rmmod nvidia_drm`), persistence mode kept by the kernel without nvidia-persistenced to
release it (gpu-operator#118), and processes with `/dev/nvidia*` open (DCGM, exporters, CUDA jobs).
Naming them turns "retry for ever with a generic hint" into one actionable line.

The host's `/proc` and `/sys` are read under `host_root` (the DaemonSet mounts the host at /host;
`/` in host mode), so processes are named by pid and command only where the host's are visible
(hostPID); tests point `host_root` at a directory they build.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PERSISTENCED_SOCKET = "var/run/nvidia-persistenced/socket"
_DEVICE_PREFIX = "/dev/nvidia"
_MAX_NAMED = 8


@dataclass(frozen=True)
class ResetBlocker:
    """One reason a GPU reset would be refused, and what the operator does about it."""

    reason: str
    fix: str

    def __str__(self) -> str:
        return f"{self.reason}; fix: {self.fix}"


@dataclass(frozen=True)
class DeviceHolder:
    pid: int
    command: str


@dataclass(frozen=True)
class HostResetChecks:
    host_root: Path = Path("/")
    own_pid: int = field(default_factory=os.getpid)

    def nvidia_drm_loaded(self) -> bool:
        if (self.host_root / "sys/module/nvidia_drm").is_dir():
            return True
        try:
            modules = (self.host_root / "proc/modules").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        return any(line.split(" ", 1)[0] == "nvidia_drm" for line in modules.splitlines())

    def persistenced_reachable(self) -> bool:
        path = self.host_root / PERSISTENCED_SOCKET
        if not path.exists():
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(1.0)
            try:
                client.connect(str(path))
            except OSError:
                return False
        return True

    def device_holders(self) -> list[DeviceHolder]:
        """Processes (other than this one) with a /dev/nvidia* file open, as far as /proc shows them."""
        return sorted(self._holders(), key=lambda holder: holder.pid)

    def _holders(self) -> Iterator[DeviceHolder]:
        proc = self.host_root / "proc"
        try:
            entries = list(proc.iterdir())
        except OSError:
            return
        for entry in entries:
            if not entry.name.isdigit() or int(entry.name) == self.own_pid:
                continue
            if _holds_a_device(entry / "fd"):
                yield DeviceHolder(int(entry.name), _command(entry))

    def blockers(self, *, persistence_mode_on: Sequence[str] = ()) -> list[ResetBlocker]:
        """Every known reason a reset of GPUs would be refused now (`persistence_mode_on`: their bus ids)."""
        found: list[ResetBlocker] = []
        if self.nvidia_drm_loaded():
            found.append(
                ResetBlocker(
                    "the nvidia_drm kernel module is loaded, and it keeps every GPU open",
                    "unload it before the change (rmmod nvidia_drm; mig-parted's documented workaround), or"
                    " blacklist it on MIG nodes (modprobe.blacklist=nvidia_drm)",
                )
            )
        if persistence_mode_on and not self.persistenced_reachable():
            buses = ", ".join(persistence_mode_on)
            found.append(
                ResetBlocker(
                    f"persistence mode is on for GPU {buses} and no nvidia-persistenced answers on"
                    f" /{PERSISTENCED_SOCKET}, so the driver keeps the GPU open",
                    "run nvidia-persistenced (it lets a reset through), or turn persistence mode off for the"
                    f" change (nvidia-smi -pm 0 -i {persistence_mode_on[0]})",
                )
            )
        holders = self.device_holders()
        if holders:
            named = ", ".join(f"pid {h.pid} ({h.command})" for h in holders[:_MAX_NAMED])
            more = f" and {len(holders) - _MAX_NAMED} more" if len(holders) > _MAX_NAMED else ""
            found.append(
                ResetBlocker(
                    f"processes hold /dev/nvidia*: {named}{more}",
                    "stop them for the change (DCGM, exporters, CUDA jobs; `migagent host --host-gpu-clients`"
                    " stops them) and apply again",
                )
            )
        return found


def _holds_a_device(fd_dir: Path) -> bool:
    try:
        fds = list(fd_dir.iterdir())
    except OSError:  # gone, or not ours to read
        return False
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(_DEVICE_PREFIX):
            return True
    return False


def _command(proc_entry: Path) -> str:
    for name in ("comm", "cmdline"):
        try:
            text = (proc_entry / name).read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if text:
            return text
    return "?"
