"""Acquire one physical GPU's handle and the identity every error message needs.

Handles are re-acquired for every driver operation and never kept: a GPU reset or a MIG mode
change invalidates them (docs/nvml.md §4, §10).
"""

from __future__ import annotations

from dataclasses import dataclass

import pynvml

from migagent.catalog import model_by_pci_device_id
from migagent.nvml.errors import nvml_call, nvml_probe
from migagent.nvml.lib import Handle, NvmlLib

# GA100 (A100, A30, A800...) PCI device ids are 0x20xx; all of them are Ampere MIG parts.
_GA100_FAMILY_MASK = 0xFF00
_GA100_FAMILY = 0x2000


@dataclass(frozen=True)
class Device:
    index: int
    handle: Handle
    pci_bus_id: str
    pci_device_id: int
    pci_subsystem_id: int | None = None

    @property
    def label(self) -> str:
        return gpu_label(self.index, self.pci_bus_id)


def gpu_label(index: int, pci_bus_id: str | None = None) -> str:
    return f"GPU {index} ({pci_bus_id})" if pci_bus_id else f"GPU {index}"


def acquire(lib: NvmlLib, index: int) -> Device:
    with nvml_call("nvmlDeviceGetHandleByIndex", gpu_label(index)):
        handle = lib.nvmlDeviceGetHandleByIndex(index)
    with nvml_call("nvmlDeviceGetPciInfo", gpu_label(index)):
        pci = lib.nvmlDeviceGetPciInfo(handle)
    subsystem = int(pci.pciSubSystemId)
    return Device(
        index=index,
        handle=handle,
        pci_bus_id=_text(pci.busId),
        pci_device_id=int(pci.pciDeviceId),
        # 0 means the driver did not report one; such a GPU matches only filters without a qualifier.
        pci_subsystem_id=subsystem or None,
    )


def _text(value: str | bytes) -> str:
    # pynvml decodes char arrays of its printable structures; a plain ctypes struct would give bytes.
    return value.decode() if isinstance(value, bytes) else str(value)


def read_mig_mode(lib: NvmlLib, device: Device) -> tuple[bool, bool] | None:
    """(current, pending) MIG mode, or None when the GPU is not MIG capable (NVML: NOT_SUPPORTED)."""
    mode = nvml_probe(
        lambda: lib.nvmlDeviceGetMigMode(device.handle),
        absent=frozenset({pynvml.NVML_ERROR_NOT_SUPPORTED}),
        what="nvmlDeviceGetMigMode",
        gpu_label=device.label,
    )
    if mode is None:
        return None
    current, pending = mode
    return current == pynvml.NVML_DEVICE_MIG_ENABLE, pending == pynvml.NVML_DEVICE_MIG_ENABLE


def mode_change_needs_reset(pci_device_id: int) -> bool:
    """Ampere activates a MIG mode change only through a reset; unknown GA100 ids are assumed Ampere."""
    model = model_by_pci_device_id(pci_device_id)
    if model is not None:
        return model.mode_change_needs_reset
    return (pci_device_id >> 16) & _GA100_FAMILY_MASK == _GA100_FAMILY
