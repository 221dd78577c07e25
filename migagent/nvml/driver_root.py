"""Find the driver's `libnvidia-ml.so.1` and `nvidia-smi` under a driver root, as mig-manager does.

On a GPU Operator node the driver lives in the driver container's root, mounted on the host at
/run/nvidia/driver (the operator's default); with a host-installed driver it is the host's root (/,
mounted into the pod at /host, say). Without the container toolkit injecting them (runtime class
`nvidia`), neither is on the pod's default paths: NVML is then loaded from the driver root, by
path, before pynvml asks the dynamic loader for `libnvidia-ml.so.1` by name (the loader returns
the library already loaded under that soname), and nvidia-smi runs chrooted into the driver root,
like mig-manager's `chroot <driver-root> nvidia-smi`.
"""

from __future__ import annotations

import ctypes
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

NVML_SONAME = "libnvidia-ml.so.1"
DEFAULT_DRIVER_ROOT = "/run/nvidia/driver"
# Where distributions and the driver containers put the library (multiarch first), then nvidia-smi.
LIBRARY_DIRS = (
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib64",
    "usr/lib",
    "lib/x86_64-linux-gnu",
    "lib/aarch64-linux-gnu",
    "lib64",
    "lib",
)
BIN_DIRS = ("usr/bin", "usr/sbin", "bin", "sbin")


@dataclass(frozen=True)
class DriverFiles:
    """What a driver root holds; None where it has no such file."""

    root: Path
    nvml: Path | None
    nvidia_smi: Path | None

    def nvidia_smi_argv(self) -> tuple[str, ...]:
        """How to run nvidia-smi: from PATH when it is there, else chrooted into the driver root."""
        if shutil.which("nvidia-smi") is not None or self.nvidia_smi is None:
            return ("nvidia-smi",)
        relative = "/" + str(self.nvidia_smi.relative_to(self.root))
        return ("chroot", str(self.root), relative)


def find_driver_files(root: Path) -> DriverFiles:
    return DriverFiles(root, _first(root, LIBRARY_DIRS, NVML_SONAME), _first(root, BIN_DIRS, "nvidia-smi"))


def _first(root: Path, directories: Sequence[str], name: str) -> Path | None:
    for directory in directories:
        candidate = root / directory / name
        if candidate.exists():
            return candidate
    return None


def load_nvml_from(root: Path, *, load: Callable[[str], object] | None = None) -> DriverFiles:
    """Load NVML from `root` unless the default search path already has it; returns what `root` holds.

    `load` is the dynamic loader (ctypes by default; tests record the calls instead)."""
    loader = load or _load_global
    files = find_driver_files(root)
    try:
        loader(NVML_SONAME)
        log.info("nvml_found_on_default_path", driver_root=str(root))
        return files
    except OSError:
        pass
    if files.nvml is None:
        log.warning("nvml_not_found", driver_root=str(root), searched=list(LIBRARY_DIRS))
        return files
    loader(str(files.nvml))
    log.info("nvml_loaded_from_driver_root", path=str(files.nvml))
    return files


def _load_global(name: str) -> object:
    return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
