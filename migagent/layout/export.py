"""Turn what a node has into a mig-parted v1 layout (the `export` verb).

Same shape as mig-parted's export (docs/mig-parted.md §4): one entry per GPU
(device-filter, devices [i], mig-enabled, mig-devices counted by CI profile name), then entries
that differ only by GPU index are merged; the filter is dropped when the node has one model, and
`devices` becomes `all` when an entry covers every GPU.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from migagent.catalog.model import ProfileTable
from migagent.layout.observed import Observation, ObservedGi, ObservedGpu
from migagent.layout.profile import ci_profile_name, gi_profile_name
from migagent.layout.spec import format_pci_id


class ExportError(ValueError):
    """A GPU whose instances cannot be named (no profile table, unknown profile ids)."""


def _gi_counts(gpu: ObservedGpu, table: ProfileTable, gi: ObservedGi) -> Counter[str]:
    gi_profile = table.gi_profile(gi.profile_id)
    if gi_profile is None:
        raise ExportError(f"GPU {gpu.index} ({gpu.name}): GI {gi.id} has profile id {gi.profile_id}, unknown")
    counts: Counter[str] = Counter()
    for ci in gi.compute_instances:
        ci_profile = gi_profile.ci_profile(ci.profile_id)
        if ci_profile is None:
            raise ExportError(
                f"GPU {gpu.index} ({gpu.name}): CI {ci.id} of GI {gi.id} has profile id {ci.profile_id}, unknown"
            )
        counts[str(ci_profile_name(gi_profile, ci_profile, table))] += 1
    return counts


def _mig_devices(gpu: ObservedGpu) -> dict[str, int]:
    if not gpu.gpu_instances:
        return {}
    if gpu.profiles is None:
        raise ExportError(f"GPU {gpu.index} ({gpu.name}): MIG instances exist but no profile table is known")
    counts: Counter[str] = Counter()
    for gi in gpu.gpu_instances:
        counts.update(_gi_counts(gpu, gpu.profiles, gi))
    return dict(sorted(counts.items()))


@dataclass
class _Entry:
    pci_device_id: int
    devices: list[int]
    mig_enabled: bool
    mig_devices: dict[str, int]


def export_layout(observation: Observation, *, label: str = "current") -> dict[str, Any]:
    """The node's current layout as a mig-parted v1 document (a plain dict, ready for YAML or JSON)."""
    entries: list[_Entry] = []
    for gpu in sorted(observation.gpus, key=lambda g: g.index):
        if not gpu.mig_capable:
            continue
        enabled = gpu.mig_current
        devices = _mig_devices(gpu) if enabled else {}
        for entry in entries:
            if (entry.pci_device_id, entry.mig_enabled, entry.mig_devices) == (gpu.pci_device_id, enabled, devices):
                entry.devices.append(gpu.index)
                break
        else:
            entries.append(_Entry(gpu.pci_device_id, [gpu.index], enabled, devices))
    models = {e.pci_device_id for e in entries}
    gpus_per_model = Counter(g.pci_device_id for g in observation.gpus if g.mig_capable)
    return {"version": "v1", "mig-configs": {label: [_render(e, models, gpus_per_model) for e in entries]}}


def _render(entry: _Entry, models: set[int], gpus_per_model: Counter[int]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    if len(models) > 1:
        doc["device-filter"] = format_pci_id(entry.pci_device_id)
    covers_all = len(entry.devices) == gpus_per_model[entry.pci_device_id]
    doc["devices"] = "all" if covers_all else entry.devices
    doc["mig-enabled"] = entry.mig_enabled
    if entry.mig_enabled:
        doc["mig-devices"] = entry.mig_devices
    return doc


_NAMED = 8


def instances_not_shown(observation: Observation) -> str | None:
    """GPU instances without a compute instance, which the exported layout cannot show, or None.

    mig-parted's format counts MIG devices, i.e. compute instances, by profile name (its own export
    walks the CIs of each GI), so a GI without one has no name to be counted under. It holds slices
    and memory all the same, and the next apply destroys it: the user must hear of it."""
    bare = [
        f"GPU {gpu.index}: {_gi_text(gpu, gi)}"
        for gpu in sorted(observation.gpus, key=lambda g: g.index)
        if gpu.mig_current
        for gi in gpu.gpu_instances
        if not gi.compute_instances
    ]
    if not bare:
        return None
    more = f" and {len(bare) - _NAMED} more" if len(bare) > _NAMED else ""
    return (
        f"{len(bare)} GPU instance(s) without a compute instance, which mig-parted's format (compute instances"
        f" counted by profile) cannot show: {'; '.join(bare[:_NAMED])}{more}; the next apply destroys them"
    )


def _gi_text(gpu: ObservedGpu, gi: ObservedGi) -> str:
    table = gpu.profiles
    profile = table.gi_profile(gi.profile_id) if table is not None else None
    name = f"profile id {gi.profile_id}" if table is None or profile is None else str(gi_profile_name(profile, table))
    return f"GPU instance {gi.id} ({name} at slot {gi.placement.start})"
