"""`advise --generate`: a layout built for one node from the demand, rather than picked from the file.

Per GPU with MIG on, the GPU instances pods hold stay where they are; the rest of the GPU is packed
anew from its idle GPU instances (kept where they are) and new instances of the profiles pending pods
ask for, at every legal placement, choosing the packing that serves the most waiting pods (highest
priority first), then destroys the fewest idle GPU instances, then creates the fewest: nothing is
created that no pod asks for, so memory slices no demand needs stay as they were or empty. GPUs whose
packing is what they hold already are left out of the layout, so the change leaves them untouched.
Nothing a pod holds is ever given up here: a generated layout evicts no pod.

The layout is written in mig-parted's v1 format and read back by the same parser and planner as any
other (`parse_layout`, then `predict` plans it), so it is valid for the GPU model and its placements
solvable, or it is not offered.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from migagent.catalog.model import GiProfile, Placement, ProfileTable
from migagent.layout.observed import ObservedGi, ObservedGpu
from migagent.layout.parse import parse_layout
from migagent.layout.profile import ci_profile_name, gi_profile_name
from migagent.layout.spec import LayoutFile
from migagent.layout.strategy import mig_resource_name
from migagent.planning.rules import rules_allow
from migagent.rollout.reported import ReportedNode

GENERATED_PREFIX = "generated-"

Demand = Sequence[tuple[str, int]]
"""Wanted units in the order they should be served: (resource name, priority of the pod asking)."""


@dataclass(frozen=True)
class _Item:
    gi: GiProfile
    placement: Placement
    existing: ObservedGi | None = None


@dataclass
class _Best:
    key: tuple[Any, ...] = ()
    items: tuple[_Item, ...] = ()


def _resource(gi: GiProfile, table: ProfileTable) -> str:
    return mig_resource_name(gi_profile_name(gi, table))


def _score(items: Sequence[_Item], table: ProfileTable, demand: Demand, levels: Sequence[int]) -> tuple[int, ...]:
    """Waiting units the new or idle GIs serve, counted per priority level (highest first)."""
    offered = Counter(_resource(item.gi, table) for item in items)
    served: Counter[int] = Counter()
    for resource, priority in demand:
        if offered[resource] > 0:
            offered[resource] -= 1
            served[priority] += 1
    return tuple(served[level] for level in levels)


def pack_gpu(gpu: ObservedGpu, busy: set[Placement], demand: Demand) -> tuple[tuple[_Item, ...], tuple[_Item, ...]]:
    """(kept busy GIs, chosen free-space packing) for one GPU; the packing may be what it holds now."""
    table = gpu.profiles
    assert table is not None
    kept = tuple(_Item(_gi(table, gi), gi.placement, gi) for gi in gpu.gpu_instances if gi.placement in busy)
    idle = {(gi.profile_id, gi.placement): gi for gi in gpu.gpu_instances if gi.placement not in busy}
    wanted = {resource for resource, _ in demand}
    created = [_Item(gi, placement) for gi in table.gi_profiles if _resource(gi, table) in wanted
               for placement in gi.placements if (gi.id, placement) not in idle]
    kept_idle = [_Item(_gi(table, gi), gi.placement, gi) for gi in idle.values()]
    options = sorted([*created, *kept_idle], key=lambda item: (item.placement.start, -item.placement.size, item.gi.id))
    taken = 0
    for item in kept:
        taken |= _mask(item.placement)
    levels = sorted({priority for _, priority in demand}, reverse=True)
    best = _Best()

    def consider(chosen: tuple[_Item, ...]) -> None:
        destroyed = sum(1 for key in idle if not any((i.gi.id, i.placement) == key for i in chosen))
        created = sum(1 for item in chosen if item.existing is None)
        key = (_score(chosen, table, demand, levels), -destroyed, -created)
        if not best.key or key > best.key:
            best.key, best.items = key, chosen

    def search(slot: int, mask: int, chosen: tuple[_Item, ...]) -> None:
        while slot < table.memory_slices and mask & (1 << slot):
            slot += 1
        if slot >= table.memory_slices:
            consider(chosen)
            return
        for item in options:
            if item.placement.start != slot or mask & _mask(item.placement):
                continue
            profiles_now = [k.gi for k in kept] + [c.gi for c in chosen] + [item.gi]
            if rules_allow(table, profiles_now):
                search(slot + item.placement.size, mask | _mask(item.placement), (*chosen, item))
        search(slot + 1, mask | (1 << slot), chosen)  # leave this slot empty

    search(0, taken, ())
    return kept, best.items


def _gi(table: ProfileTable, gi: ObservedGi) -> GiProfile:
    profile = table.gi_profile(gi.profile_id)
    assert profile is not None, f"GI profile {gi.profile_id} is not in the GPU's table"
    return profile


def _mask(placement: Placement) -> int:
    return ((1 << placement.size) - 1) << placement.start


def _counts(table: ProfileTable, items: Sequence[_Item]) -> dict[str, int]:
    """mig-devices of the GPU: compute instances by profile name (an idle or busy GI keeps its own CIs)."""
    counts: Counter[str] = Counter()
    for item in items:
        cis = item.existing.compute_instances if item.existing is not None else ()
        if not cis:
            counts[str(gi_profile_name(item.gi, table))] += 1
        for ci in cis:
            profile = item.gi.ci_profile(ci.profile_id)
            name = ci_profile_name(item.gi, profile, table) if profile else gi_profile_name(item.gi, table)
            counts[str(name)] += 1
    return dict(sorted(counts.items()))


def generate_node(reported: ReportedNode, demand: Demand) -> dict[int, dict[str, int]]:
    """Per GPU index that changes, its new mig-devices; the demand is served across GPUs, the GPU with
    the most idle memory slices first. Empty when no GPU would change."""
    busy = {(gpu, placement) for (gpu, placement), pods in reported.pods.items() if pods}
    left = list(demand)
    changes: dict[int, dict[str, int]] = {}
    gpus = [g for g in reported.observation.gpus if g.mig_current and g.profiles is not None]
    for gpu in sorted(gpus, key=lambda g: (-_idle_slices(g, busy), g.index)):
        table = gpu.profiles
        assert table is not None
        on_gpu = {placement for index, placement in busy if index == gpu.index}
        kept, packing = pack_gpu(gpu, on_gpu, left)
        target = _counts(table, (*kept, *packing))
        if target != _counts(table, kept + tuple(_Item(_gi(table, g), g.placement, g) for g in gpu.gpu_instances
                                                   if g.placement not in on_gpu)):
            changes[gpu.index] = target
        offered = Counter(_resource(item.gi, table) for item in packing)
        remaining: list[tuple[str, int]] = []
        for resource, priority in left:
            if offered[resource] > 0:
                offered[resource] -= 1
            else:
                remaining.append((resource, priority))
        left = remaining
    return changes


def _idle_slices(gpu: ObservedGpu, busy: set[tuple[int, Placement]]) -> int:
    table = gpu.profiles
    held = sum(gi.placement.size for gi in gpu.gpu_instances if (gpu.index, gi.placement) in busy)
    return (table.memory_slices if table is not None else 0) - held


def config_name(changes: dict[int, dict[str, int]]) -> str:
    """A name that depends only on the content, so the same advice names the same layout each time."""
    text = yaml.safe_dump(changes, sort_keys=True)
    return GENERATED_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:10]


def layout_document(configs: dict[str, dict[int, dict[str, int]]]) -> dict[str, Any]:
    """mig-parted v1: per config, one entry per GPU it changes (`devices: [i]`)."""
    return {
        "version": "v1",
        "mig-configs": {
            name: [{"devices": [index], "mig-enabled": True, "mig-devices": devices}
                   for index, devices in sorted(changes.items())]
            for name, changes in sorted(configs.items())
        },
    }


def generated_layout(name: str, changes: dict[int, dict[str, int]]) -> LayoutFile:
    """The layout as an admin would add it to the file: written as mig-parted v1 and read back by its parser."""
    return parse_layout(yaml.safe_dump(layout_document({name: changes})), source=f"generated layout {name}")
