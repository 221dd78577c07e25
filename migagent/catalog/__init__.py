"""GPU model catalog: profile and placement tables for every supported MIG GPU (data, no I/O seams)."""

from __future__ import annotations

from migagent.catalog.loader import load_catalog
from migagent.catalog.model import (
    Architecture,
    CiProfile,
    Confidence,
    Engines,
    GiProfile,
    GpuModel,
    MediaAttribute,
    Placement,
    ProfileTable,
)


class UnknownGpuModelError(KeyError):
    """A model key or PCI device id the catalog does not know."""

    def __str__(self) -> str:
        return str(self.args[0])


def all_models() -> tuple[GpuModel, ...]:
    """One row per GPU model: what planning, the simulator and the shipped layouts cover."""
    return tuple(m for m in load_catalog() if not m.variant_of)


def driver_variants() -> tuple[GpuModel, ...]:
    """Tables some drivers report for a model instead of its row (e.g. GB200's early, larger names)."""
    return tuple(m for m in load_catalog() if m.variant_of)


def model_keys() -> tuple[str, ...]:
    """Every key `model_by_key` accepts: models, then driver variants."""
    return tuple(m.key for m in (*all_models(), *driver_variants()))


def model_by_key(key: str) -> GpuModel:
    """Look a model up by catalog key, case-insensitively (`h100-80gb-sxm` works)."""
    for model in load_catalog():
        if model.key.lower() == key.strip().lower():
            return model
    raise UnknownGpuModelError(f"unknown GPU model {key!r}; valid models: {', '.join(model_keys())}")


def model_by_pci_device_id(pci_device_id: int) -> GpuModel | None:
    return next((m for m in all_models() if pci_device_id in m.pci_device_ids), None)


def rows_for_pci_device_id(pci_device_id: int) -> tuple[GpuModel, ...]:
    """The model with this PCI id, then its driver variants (same chip, other memory sizes and names)."""
    return tuple(m for m in (*all_models(), *driver_variants()) if pci_device_id in m.pci_device_ids)


def model_by_pci_device_id_and_memory(pci_device_id: int, memory_mb: int | None) -> GpuModel | None:
    """The row for this PCI id whose memory is nearest what the GPU reports: driver variants share a
    PCI id (GB200 186GB / 189GB) and only the memory tells them apart. No memory: the primary row."""
    rows = rows_for_pci_device_id(pci_device_id)
    if not rows or memory_mb is None:
        return rows[0] if rows else None
    return min(rows, key=lambda row: abs(row.profiles.total_memory_mb - memory_mb))


__all__ = [
    "Architecture",
    "CiProfile",
    "Confidence",
    "Engines",
    "GiProfile",
    "GpuModel",
    "MediaAttribute",
    "Placement",
    "ProfileTable",
    "UnknownGpuModelError",
    "all_models",
    "driver_variants",
    "model_by_key",
    "model_by_pci_device_id",
    "model_by_pci_device_id_and_memory",
    "model_keys",
    "rows_for_pci_device_id",
]
