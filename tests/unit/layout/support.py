"""Shared helpers for the layout tests: catalog-backed GPU identities and fixture files."""

from __future__ import annotations

from pathlib import Path

from migagent.catalog import model_by_key
from migagent.layout.resolve import GpuIdentity

DATA = Path(__file__).parent / "data"
MIG_PARTED_STYLE = DATA / "mig-parted-style.yaml"


def gpu(index: int, model_key: str, *, pci: int | None = None, subsystem: int | None = None) -> GpuIdentity:
    """GPU `index` of catalog model `model_key`, with its primary PCI id unless `pci` says otherwise."""
    model = model_by_key(model_key)
    return GpuIdentity(
        index=index,
        pci_device_id=model.primary_pci_device_id if pci is None else pci,
        subsystem_id=subsystem,
        profiles=model.profiles,
        label=f"GPU {index} ({model.key})",
    )
