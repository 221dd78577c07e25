"""Node layouts written the way a mig-parted config reads, resolved by migagent's own resolver.

A node layout is a list of (devices, layout) pairs; like entries of a mig-parted config, a later
pair overrides an earlier one for the GPUs it names. A layout is a profile-count mapping
(`{"3g.40gb": 1, "1g.10gb": 2}`, MIG enabled), `BALANCED` (the model's `all-balanced` counts, as
configs/mig-layouts generates them) or `DISABLED`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

from migagent.catalog import GpuModel
from migagent.layout.desired import DesiredNode
from migagent.layout.generate import balanced_mig_devices
from migagent.layout.profile import MigProfile
from migagent.layout.resolve import GpuIdentity, resolve_entries
from migagent.layout.spec import ALL_DEVICES, LayoutEntry

BALANCED: Final = "all-balanced"
DISABLED: Final = "all-disabled"
GpuLayout = Mapping[str, int] | Literal["all-balanced", "all-disabled"]
Devices = Literal["all"] | tuple[int, ...]
NodeLayout = tuple[tuple[Devices, GpuLayout], ...]


def layout_per_gpu(layout: NodeLayout, gpu_count: int) -> tuple[GpuLayout, ...]:
    chosen: list[GpuLayout | None] = [None] * gpu_count
    for devices, gpu_layout in layout:
        for index in range(gpu_count) if devices == ALL_DEVICES else devices:
            chosen[index] = gpu_layout
    missing = [i for i, c in enumerate(chosen) if c is None]
    if missing:
        raise ValueError(f"node layout selects no layout for GPU(s) {missing}; add an ('all', ...) pair first")
    return tuple(c for c in chosen if c is not None)


def _entry(index: int, gpu_layout: GpuLayout, model: GpuModel) -> LayoutEntry:
    if gpu_layout == DISABLED:
        return LayoutEntry(index=index, devices=(index,), device_filter=(), mig_enabled=False)
    counts = balanced_mig_devices(model) if gpu_layout == BALANCED else tuple(dict(gpu_layout).items())
    mig_devices = tuple((MigProfile.parse(name), count) for name, count in counts)
    return LayoutEntry(index=index, devices=(index,), device_filter=(), mig_enabled=True, mig_devices=mig_devices)


def resolve_node_layout(layout: NodeLayout, models: Sequence[GpuModel], *, name: str) -> DesiredNode:
    """The desired node for GPUs 0..n-1 of these models; every GPU is selected (like `devices: all`)."""
    per_gpu = layout_per_gpu(layout, len(models))
    entries = [_entry(i, gpu_layout, model) for i, (gpu_layout, model) in enumerate(zip(per_gpu, models, strict=True))]
    identities = [
        GpuIdentity(
            index=i,
            pci_device_id=model.primary_pci_device_id,
            subsystem_id=None,
            profiles=model.profiles,
            label=f"GPU {i} ({model.key})",
        )
        for i, model in enumerate(models)
    ]
    return resolve_entries(entries, identities, config_name=name)
