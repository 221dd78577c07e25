"""The files a driver gives a node beside NVML, for a simulated node, written under one directory.

NVIDIA's tools read these as well as calling NVML: mig-parted checks `/proc/modules` for the nvidia
module and walks `/sys/bus/pci/devices` (go-nvlib's nvpci: vendor, class, device, driver link,
numa_node, resource, config) to match GPUs to NVML by bus id; the device plugin maps MIG devices
to `/dev/nvidia-caps/nvidia-capN` through `/proc/driver/nvidia-caps/mig-minors`; the container
toolkit reads `/proc/devices` and `/proc/driver/nvidia/...`. The tree has the host's layout
(`proc/`, `sys/`, `dev/`, and a driver root's `usr/bin/nvidia-smi`, `usr/lib/.../libnvidia-ml.so.1`),
so it serves as a `--dev-root`/driver root as it is, and `mounts.py` lays it over the fixed paths in
a private mount namespace.

The GPUs (count, models, bus ids, UUIDs) are fixed for a node's life, so the tree is written once
per run, from the facts node_gpus.py reads in the state file (this module imports nothing from
migagent: mounts.py writes the tree onto a tmpfs inside the namespace). MIG capability files exist
for every GPU instance and compute instance ID a GPU can have, not only the live ones [inf: the
driver creates them with the instances; the tools only look up the ones they name].
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from migagent_sim.gpu_node.devices import DEVICE_MAJORS, NVIDIA_MAJOR

NVIDIA_VENDOR = 0x10DE
CLASS_3D_CONTROLLER = 0x030200
GPU_INSTANCE_IDS = 15  # gi0..gi14 per GPU in mig-minors
COMPUTE_INSTANCE_IDS = 8  # ci0..ci7 per GPU instance
_MINORS_PER_GI = 1 + COMPUTE_INSTANCE_IDS
_MINORS_PER_GPU = GPU_INSTANCE_IDS * _MINORS_PER_GI
DRIVER_VERSION = "580.65.06"  # what FakeNvml reports (sim_driver_version)
LIBRARY_DIR = "usr/lib/x86_64-linux-gnu"


@dataclass(frozen=True)
class GpuFacts:
    """What the files say about one simulated GPU (node_gpus.py reads them from the state file)."""

    index: int  # also the device minor: /dev/nvidia<index>
    name: str
    uuid: str
    address: str  # sysfs's form of the bus id: 0000:18:00.0
    device_id: int  # PCI device id, 0x2330
    subsystem: int  # 0xDDDDVVVV: subsystem device, subsystem vendor


def save_facts(path: Path, gpus: Sequence[GpuFacts]) -> None:
    path.write_text(json.dumps([asdict(gpu) for gpu in gpus]), encoding="utf-8")


def load_facts(path: Path) -> list[GpuFacts]:
    return [GpuFacts(**raw) for raw in json.loads(path.read_text(encoding="utf-8"))]


def gi_cap_minor(gpu: int, gi: int) -> int:
    """The nvidia-caps minor of `gpuN/giM/access`; 1 and 2 are the MIG config and monitor caps."""
    return 3 + gpu * _MINORS_PER_GPU + gi * _MINORS_PER_GI


def ci_cap_minor(gpu: int, gi: int, ci: int) -> int:
    return gi_cap_minor(gpu, gi) + 1 + ci


def mig_minors(gpus: Sequence[GpuFacts]) -> str:
    """`/proc/driver/nvidia-caps/mig-minors`: capability path -> nvidia-caps minor."""
    lines = ["config 1", "monitor 2"]
    for gpu in gpus:
        for gi in range(GPU_INSTANCE_IDS):
            lines.append(f"gpu{gpu.index}/gi{gi}/access {gi_cap_minor(gpu.index, gi)}")
            lines += [f"gpu{gpu.index}/gi{gi}/ci{ci}/access {ci_cap_minor(gpu.index, gi, ci)}" for ci in range(8)]
    return "\n".join(lines) + "\n"


def _capability(minor: int) -> str:
    return f"DeviceFileMinor: {minor}\nDeviceFileMode: 292\nDeviceFileModify: 1\n"


def _capability_files(gpus: Sequence[GpuFacts]) -> Iterator[tuple[str, str]]:
    base = "proc/driver/nvidia/capabilities"
    yield f"{base}/mig/config", _capability(1)
    yield f"{base}/mig/monitor", _capability(2)
    for gpu in gpus:
        for gi in range(GPU_INSTANCE_IDS):
            yield f"{base}/gpu{gpu.index}/mig/gi{gi}/access", _capability(gi_cap_minor(gpu.index, gi))
            for ci in range(COMPUTE_INSTANCE_IDS):
                yield f"{base}/gpu{gpu.index}/mig/gi{gi}/ci{ci}/access", _capability(ci_cap_minor(gpu.index, gi, ci))


def _gpu_information(gpu: GpuFacts) -> str:
    return (
        f"Model: \t\t {gpu.name}\nIRQ:   \t\t {100 + gpu.index}\nGPU UUID: \t {gpu.uuid}\n"
        f"Video BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
        f"Bus Location: \t {gpu.address}\nDevice Minor: \t {gpu.index}\nGPU Excluded:\t No\n"
    )


def _proc_files(gpus: Sequence[GpuFacts]) -> Iterator[tuple[str, str]]:
    # /proc/modules: name, size, instances, dependents, state, address (what lsmod reads).
    yield "proc/modules", "nvidia 104857600 0 - Live 0x0000000000000000 (POE)\n"
    yield (
        "proc/driver/nvidia/version",
        (
            f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {DRIVER_VERSION}  (simulated by migagent)\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
        ),
    )
    for gpu in gpus:
        yield f"proc/driver/nvidia/gpus/{gpu.address}/information", _gpu_information(gpu)
    yield "proc/driver/nvidia-caps/mig-minors", mig_minors(gpus)
    yield from _capability_files(gpus)


def config_space(gpu: GpuFacts) -> bytes:
    """256 bytes of PCI config space: ids, class, and a capability list holding one power-management
    capability (no vendor-specific one: no vGPU), as nvpci parses it."""
    config = bytearray(256)
    config[0:4] = NVIDIA_VENDOR.to_bytes(2, "little") + gpu.device_id.to_bytes(2, "little")
    config[6] = 0x10  # status: capability list present
    config[9:12] = CLASS_3D_CONTROLLER.to_bytes(3, "little")
    config[0x2C:0x30] = (gpu.subsystem & 0xFFFF).to_bytes(2, "little") + (gpu.subsystem >> 16).to_bytes(2, "little")
    config[0x34] = 0x60  # capability pointer
    config[0x60:0x62] = bytes([0x01, 0x00])  # power management, last in the list
    return bytes(config)


def _resource(gpu: GpuFacts) -> str:
    """sysfs `resource`: start, end, flags of BAR0 (registers), BAR1 (memory), BAR3, then unused."""
    base = 0x2000_0000_0000 + gpu.index * 0x40_0000_0000
    bars = [(0xE000_0000 + gpu.index * 0x100_0000, 0x100_0000, 0x40200), (base, 0x20_0000_0000, 0x14220C)]
    bars.append((base + 0x20_0000_0000, 0x200_0000, 0x14220C))
    rows = [f"0x{start:016x} 0x{start + size - 1:016x} 0x{flags:016x}" for start, size, flags in bars]
    rows.insert(2, "0x0000000000000000 0x0000000000000000 0x0000000000000000")  # BAR1 is 64-bit: 2 rows
    rows += ["0x0000000000000000 0x0000000000000000 0x0000000000000000"] * (13 - len(rows))
    return "\n".join(rows) + "\n"


def _pci_files(gpu: GpuFacts, gpus_per_numa_node: int) -> Iterator[tuple[str, str]]:
    device_id, subsystem = gpu.device_id, gpu.subsystem
    base = f"sys/bus/pci/devices/{gpu.address}"
    yield f"{base}/vendor", f"0x{NVIDIA_VENDOR:04x}\n"
    yield f"{base}/device", f"0x{device_id:04x}\n"
    yield f"{base}/subsystem_vendor", f"0x{subsystem & 0xFFFF:04x}\n"
    yield f"{base}/subsystem_device", f"0x{subsystem >> 16:04x}\n"
    yield f"{base}/class", f"0x{CLASS_3D_CONTROLLER:06x}\n"
    yield f"{base}/numa_node", f"{gpu.index // gpus_per_numa_node}\n"  # two sockets, as on an HGX board
    yield f"{base}/resource", _resource(gpu)
    yield f"{base}/irq", f"{100 + gpu.index}\n"


def write_tree(root: Path, gpus: Sequence[GpuFacts], *, library_dir: Path | None = None) -> None:
    """Write the node's files under `root` (created); `library_dir` (the fake library and nvidia-smi)
    makes `root` a driver root too."""
    per_node = max(1, -(-len(gpus) // 2))
    files = [*_proc_files(gpus), *(f for gpu in gpus for f in _pci_files(gpu, per_node))]
    for relative, text in files:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="ascii")
    driver = root / "sys/bus/pci/drivers/nvidia"
    driver.mkdir(parents=True, exist_ok=True)
    for gpu in gpus:
        device = root / "sys/bus/pci/devices" / gpu.address
        (device / "config").write_bytes(config_space(gpu))
        (device / "driver").symlink_to(driver)  # nvpci takes the link's last element: "nvidia"
        (driver / gpu.address).symlink_to(device)
    _write_device_nodes(root / "dev", gpus)
    if library_dir is not None:
        _link(root / LIBRARY_DIR / "libnvidia-ml.so.1", library_dir / "libnvidia-ml.so.1")
        _link(root / "usr/bin/nvidia-smi", library_dir / "nvidia-smi")


def _link(path: Path, target: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target.resolve())


def _write_device_nodes(dev: Path, gpus: Sequence[GpuFacts]) -> None:
    """Character devices with the driver's numbers; opening one fails (no driver), as the tools never do."""
    caps_major, uvm_major = DEVICE_MAJORS["nvidia-caps"], DEVICE_MAJORS["nvidia-uvm"]
    nodes = {"nvidiactl": (NVIDIA_MAJOR, 255), "nvidia-modeset": (NVIDIA_MAJOR, 254)}
    nodes |= {"nvidia-uvm": (uvm_major, 0), "nvidia-uvm-tools": (uvm_major, 1)}
    nodes |= {f"nvidia{gpu.index}": (NVIDIA_MAJOR, gpu.index) for gpu in gpus}
    minors = [1, 2, *(m for gpu in gpus for gi in range(GPU_INSTANCE_IDS) for m in _gi_minors(gpu.index, gi))]
    nodes |= {f"nvidia-caps/nvidia-cap{minor}": (caps_major, minor) for minor in minors}
    (dev / "nvidia-caps").mkdir(parents=True, exist_ok=True)
    for name, (major, minor) in nodes.items():
        os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))


def _gi_minors(gpu: int, gi: int) -> list[int]:
    return [gi_cap_minor(gpu, gi), *(ci_cap_minor(gpu, gi, ci) for ci in range(COMPUTE_INSTANCE_IDS))]
