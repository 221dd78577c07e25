"""Apply a config's entries to a node's GPUs, as mig-parted does (docs/mig-parted.md §1, §2).

For each entry in file order, every GPU whose index is in `devices` and whose PCI id matches the
filter is selected; a later entry replaces an earlier one for the same GPU; GPUs no entry selects
are absent from the result and left untouched. Each profile name is resolved against the selected
GPU's *own* profile table (mixed nodes), never against GPU 0's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from migagent.catalog import ProfileTable, rows_for_pci_device_id
from migagent.errors import LayoutDoesNotFitError, LayoutSelectsNoGpuError
from migagent.layout.desired import DesiredGi, DesiredGpu, DesiredNode
from migagent.layout.gpus import gpus_named
from migagent.layout.observed import ObservedGpu
from migagent.layout.packing import (
    ProfileNotOfferedError,
    ResolvedProfile,
    flatten,
    pack_compute_instances,
    resolve_profile,
)
from migagent.layout.parse import select_config
from migagent.layout.profile import MigProfile
from migagent.layout.spec import ALL_DEVICES, LayoutEntry, LayoutFile, format_pci_id
from migagent.layout.strict_yaml import path_part

_NO_PROFILES = ProfileTable(total_memory_mb=0, memory_slices=0, compute_slices=0, gi_profiles=())


@dataclass(frozen=True)
class GpuIdentity:
    """What entry selection and profile resolution need to know about one GPU."""

    index: int
    pci_device_id: int
    subsystem_id: int | None
    profiles: ProfileTable
    label: str


def identity_of(gpu: ObservedGpu) -> GpuIdentity:
    """The identity of an observed GPU. A GPU without MIG gets an empty profile table.

    A GPU whose PCI subsystem id is unknown matches only filters without a `:0xSSSSVVVV` qualifier.
    """
    return GpuIdentity(
        index=gpu.index,
        pci_device_id=gpu.pci_device_id,
        subsystem_id=gpu.pci_subsystem_id,
        profiles=gpu.profiles if gpu.profiles is not None else _NO_PROFILES,
        label=f"GPU {gpu.index} ({gpu.name})",
    )


def resolve_config(layout: LayoutFile, name: str | None, gpus: Sequence[GpuIdentity]) -> DesiredNode:
    """Select config `name` (see `select_config`) and resolve it for this node's GPUs.

    A config that selects none of them is an error (`LayoutSelectsNoGpuError`), raised before
    anything is touched: mig-parted would report success for it; so is an entry listing a GPU index
    that selects no GPU (`check_listed_devices`).
    """
    entries = select_config(layout, name)
    config_name = name if name is not None else layout.names[0]
    desired = resolve_entries(entries, gpus, config_name=config_name)
    if not desired.gpus:
        raise LayoutSelectsNoGpuError(selects_no_gpu_message(layout.path, config_name, entries, gpus))
    check_listed_devices(layout.path, config_name, entries, gpus)
    return desired


def selects_no_gpu_message(
    path: str, config_name: str, entries: Sequence[LayoutEntry], gpus: Sequence[GpuIdentity]
) -> str:
    """Names the config, what its entries ask for, and the GPUs the node has."""
    asked = "; ".join(f"[{entry.index}] {_selection(entry)}" for entry in entries)
    node = ", ".join(f"{gpu.label} {format_pci_id(gpu.pci_device_id)}" for gpu in gpus) or "no GPUs"
    return (
        f"{path}: config {config_name!r} selects none of this node's GPUs; its entries select {asked}; "
        f"the node has {node}. Check the config's devices and device-filter, or the name it was selected by"
    )


def check_listed_devices(
    path: str, config_name: str, entries: Sequence[LayoutEntry], gpus: Sequence[GpuIdentity]
) -> None:
    """Raise LayoutSelectsNoGpuError when an entry lists a GPU index that selects no GPU of this node:
    an index the node lacks (`devices: [0, 9]` on two GPUs), or a GPU the entry's device-filter does
    not match. mig-parted skips such an index without a word, and the GPU meant is left as it was.

    An entry whose device-filter matches none of the node's GPUs is meant for other hardware (the
    default config file holds one entry per model in one config) and is not checked here; a config
    none of whose entries selects a GPU is `resolve_config`'s error."""
    problems = [problem for entry in entries for problem in _unselected_indices(entry, gpus, config_name)]
    if problems:
        raise LayoutSelectsNoGpuError(f"{path}: " + "; ".join(problems))


def _unselected_indices(entry: LayoutEntry, gpus: Sequence[GpuIdentity], config_name: str) -> list[str]:
    if entry.devices == ALL_DEVICES:
        return []
    matched = [gpu for gpu in gpus if entry.matches_pci(gpu.pci_device_id, gpu.subsystem_id)]
    if not matched:
        return []
    by_index = {gpu.index: gpu for gpu in gpus}
    where = f"mig-configs.{path_part(config_name)}[{entry.index}]"
    problems = []
    for index in entry.devices:
        gpu = by_index.get(index)
        if gpu is None:
            problems.append(f"{where} lists GPU {index}, which this node does not have (it has {gpus_named(by_index)})")
        elif gpu not in matched:
            problems.append(
                f"{where} lists GPU {index}, which its device-filter {', '.join(str(f) for f in entry.device_filter)}"
                f" does not match ({gpu.label} is {format_pci_id(gpu.pci_device_id)})"
            )
    return problems


def _selection(entry: LayoutEntry) -> str:
    devices = "devices: all" if entry.devices == ALL_DEVICES else f"devices: {list(entry.devices)}"
    if not entry.device_filter:
        return devices
    return f"{devices} with device-filter {', '.join(str(f) for f in entry.device_filter)}"


def resolve_entries(
    entries: Sequence[LayoutEntry], gpus: Sequence[GpuIdentity], *, config_name: str
) -> DesiredNode:
    """Targets for the GPUs the entries select; every problem on every GPU is reported together."""
    # Keyed by position, not index: offline identities of several models may all be GPU 0.
    winners: dict[int, LayoutEntry] = {}
    for entry in entries:
        for position, gpu in enumerate(gpus):
            if entry.selects(gpu_index=gpu.index, pci_device_id=gpu.pci_device_id, subsystem_id=gpu.subsystem_id):
                winners[position] = entry
    desired: list[DesiredGpu] = []
    errors: list[str] = []
    for position, winner in sorted(winners.items(), key=lambda item: gpus[item[0]].index):
        try:
            desired.append(resolve_entry(winner, gpus[position], config_name=config_name))
        except LayoutDoesNotFitError as exc:
            errors.append(str(exc))
    if errors:
        raise LayoutDoesNotFitError("\n".join(errors))
    return DesiredNode(gpus=tuple(desired))


def resolve_entry(entry: LayoutEntry, gpu: GpuIdentity, *, config_name: str) -> DesiredGpu:
    """What one entry asks of one GPU, ignoring whether the entry selects it."""
    if not entry.mig_enabled:
        return DesiredGpu(index=gpu.index, mig_enabled=False, config_name=config_name)
    where = f"mig-configs.{path_part(config_name)}[{entry.index}]"
    resolved: list[tuple[ResolvedProfile, int]] = []
    errors: list[str] = []
    for profile, count in entry.requested:
        try:
            resolved.append((resolve_profile(profile, gpu.profiles), count))
        except ProfileNotOfferedError as exc:
            alias = _variant_alias(profile, gpu)
            if alias is not None:
                resolved.append((alias, count))
                continue
            errors.append(f"{gpu.label}: profile '{profile}' in {where} is not offered; {exc}")
    if errors:
        raise LayoutDoesNotFitError("\n".join(errors))
    # Every CI takes at least one compute slice. Refusing more CIs than that here also keeps a count
    # such as 10**9 from being expanded one item per CI below.
    total = sum(count for _, count in resolved)
    if total > gpu.profiles.compute_slices:
        raise LayoutDoesNotFitError(
            f"{gpu.label}: {where}.mig-devices asks for {total} compute instances; this GPU has "
            f"{gpu.profiles.compute_slices} compute slices, so at most {gpu.profiles.compute_slices} fit"
        )
    # Whether the GIs fit (instance limits, slices, placements) is the planner's exact solver's call:
    # it also says which close layout would fit.
    packed = pack_compute_instances(flatten(resolved))
    instances = tuple(DesiredGi(p.gi.id, tuple(sorted(ci.id for ci in p.cis))) for p in packed)
    return DesiredGpu(index=gpu.index, mig_enabled=True, gpu_instances=instances, config_name=config_name)


def _variant_alias(profile: MigProfile, gpu: GpuIdentity) -> ResolvedProfile | None:
    """`profile` named as a driver variant of this GPU's chip names it: GB200 drivers report 186 or 189 GB,
    one PCI id, so `1g.23gb` and `1g.24gb` are the same GI profile (same NVML id). A layout file (mig-parted's
    format selects by PCI id only) written for one variant then means the same instances on the other."""
    for row in rows_for_pci_device_id(gpu.pci_device_id):
        try:
            theirs = resolve_profile(profile, row.profiles)
        except ProfileNotOfferedError:
            continue
        gi = gpu.profiles.gi_profile(theirs.gi.id)
        if gi is None or gi.slices != theirs.gi.slices:
            continue
        ci = gi.default_ci if profile.is_full_gi else gi.ci_profile(theirs.ci.id)
        if ci is not None:
            return ResolvedProfile(profile=profile, gi=gi, ci=ci)
    return None
