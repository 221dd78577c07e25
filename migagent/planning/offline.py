"""Observations of imaginary, empty GPUs of catalog models, for planning without hardware."""

from __future__ import annotations

from collections.abc import Sequence

from migagent.catalog.model import GpuModel
from migagent.layout.observed import Observation, ObservedGpu


def empty_observation(models: Sequence[GpuModel], *, mig_enabled: bool = True) -> Observation:
    """GPUs 0..n-1 of the given models with no instances, using the catalog's profile tables.

    The identities (uuid `GPU-offline-<i>`, bus `0000:<i>:00.0`) are placeholders that look like
    nothing a real node reports, so an offline plan cannot be mistaken for one.
    """
    return Observation(
        gpus=tuple(
            ObservedGpu(
                index=index,
                uuid=f"GPU-offline-{index}",
                name=model.name,
                pci_bus_id=f"0000:{index:02x}:00.0",
                pci_device_id=model.primary_pci_device_id,
                mig_capable=True,
                mig_current=mig_enabled,
                mig_pending=mig_enabled,
                profiles=model.profiles,
                mode_change_needs_reset=model.mode_change_needs_reset,
            )
            for index, model in enumerate(models)
        )
    )
