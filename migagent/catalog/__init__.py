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
    return load_catalog()


def model_keys() -> tuple[str, ...]:
    return tuple(m.key for m in load_catalog())


def model_by_key(key: str) -> GpuModel:
    """Look a model up by catalog key, case-insensitively (`h100-80gb-sxm` works)."""
    for model in load_catalog():
        if model.key.lower() == key.strip().lower():
            return model
    raise UnknownGpuModelError(f"unknown GPU model {key!r}; valid models: {', '.join(model_keys())}")


def model_by_pci_device_id(pci_device_id: int) -> GpuModel | None:
    return next((m for m in load_catalog() if pci_device_id in m.pci_device_ids), None)


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
    "model_by_key",
    "model_by_pci_device_id",
    "model_keys",
]
