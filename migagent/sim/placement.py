"""Slice accounting, capacity, automatic placement and GI IDs: the simulator's MIG rules (pure).

All numbers come from the catalog's `ProfileTable`; nothing here knows a particular GPU.
The rules are docs/nvml.md's.
"""

from __future__ import annotations

from collections.abc import Iterable

from migagent.catalog import CiProfile, GiProfile, MediaAttribute, Placement, ProfileTable
from migagent.sim.state import SimGpu, SimGpuInstance


def _occupied(placements: Iterable[Placement]) -> frozenset[int]:
    return frozenset(slot for placement in placements for slot in placement.slots())


def occupied_memory_slices(gpu: SimGpu) -> frozenset[int]:
    return _occupied(gi.placement for gi in gpu.gpu_instances)


def occupied_compute_slices(gi: SimGpuInstance) -> frozenset[int]:
    return _occupied(ci.placement for ci in gi.compute_instances)


def _free(placements: Iterable[Placement], occupied: frozenset[int]) -> list[Placement]:
    return [p for p in placements if not (p.slots() & occupied)]


def media_allows(table: ProfileTable, gpu: SimGpu, profile: GiProfile) -> bool:
    """Media-engine exclusivity (docs/nvml.md §5): one `+me` GI per GPU; `+me.all` coexists only with `-me` GIs.

    The `+me.all` rule is applied both ways (an existing non-`-me` GI also blocks a new `+me.all`),
    which follows from nvml.h's wording "prevents allocation of all but _NO_ME profiles" [inf].
    """
    existing = [_media_of(table, gi) for gi in gpu.gpu_instances]
    if MediaAttribute.ME_ALL in existing and profile.media is not MediaAttribute.NO_ME:
        return False
    if profile.media is MediaAttribute.ME_ALL and any(m is not MediaAttribute.NO_ME for m in existing):
        return False
    return not (profile.media is MediaAttribute.ME and MediaAttribute.ME in existing)


def _media_of(table: ProfileTable, gi: SimGpuInstance) -> MediaAttribute:
    profile = table.gi_profile(gi.profile_id)
    return profile.media if profile is not None else MediaAttribute.NONE


def free_gi_placements(table: ProfileTable, gpu: SimGpu, profile: GiProfile) -> list[Placement]:
    """Legal placements of `profile` that are free now, or none when the profile is blocked."""
    existing = sum(1 for gi in gpu.gpu_instances if gi.profile_id == profile.id)
    if existing >= profile.max_instances or not media_allows(table, gpu, profile):
        return []
    return _free(profile.placements, occupied_memory_slices(gpu))


def gi_remaining_capacity(table: ProfileTable, gpu: SimGpu, profile: GiProfile) -> int:
    """docs/nvml.md §5: how many more GIs of `profile` fit, i.e. nvidia-smi's `Free` column."""
    existing = sum(1 for gi in gpu.gpu_instances if gi.profile_id == profile.id)
    return min(profile.max_instances - existing, len(free_gi_placements(table, gpu, profile)))


def choose_gi_placement(table: ProfileTable, gpu: SimGpu, profile: GiProfile, *, rule: str) -> Placement | None:
    """The placement `nvmlDeviceCreateGpuInstance` picks, or None when the profile does not fit.

    `inferred` (default, docs/nvml.md §6, an inference that reproduces every observed A100/H100 sequence but
    not one GH200 capture): take the free legal placement that blocks the fewest currently-free
    legal placements of all profiles, counting each (profile, placement) pair once; ties go to the
    lowest start. `lowest-start`: the first free legal placement.
    """
    candidates = free_gi_placements(table, gpu, profile)
    if not candidates:
        return None
    if rule == "lowest-start":
        return min(candidates, key=lambda p: p.start)
    occupied = occupied_memory_slices(gpu)
    free_pairs = [
        placement
        for other in table.gi_profiles
        for placement in _free(other.placements, occupied)
    ]

    def blocked(candidate: Placement) -> int:
        return sum(1 for placement in free_pairs if placement.overlaps(candidate))

    return min(candidates, key=lambda p: (blocked(p), p.start))


def gi_id_for(placement: Placement, *, memory_slices: int, id_map: str) -> int:
    """GI ID = RM swizzId: a node of the binary tree of memory ranges (docs/nvml.md §7).

    Level k (size = memory_slices / 2**k) holds IDs 2**k - 1 .. 2**(k+1) - 2, ordered by start.
    `xor4` models boards whose halves are swapped (physical start = start XOR half the memory
    slices, i.e. XOR 4 on 8-slice parts), so seven 1g GIs get IDs {7,8,9,11,12,13,14}.
    """
    size = placement.size
    if size <= 0 or memory_slices % size or (memory_slices // size) & (memory_slices // size - 1):
        raise ValueError(f"placement {placement} is not a power-of-two share of {memory_slices} memory slices")
    start = placement.start
    if id_map == "xor4" and size < memory_slices:
        start ^= memory_slices // 2
    level_first_id = memory_slices // size - 1
    return level_first_id + start // size


def free_ci_placements(gi: SimGpuInstance, profile: CiProfile) -> list[Placement]:
    """Free legal placements of a CI profile, in compute slices relative to its GI."""
    existing = sum(1 for ci in gi.compute_instances if ci.profile_id == profile.id)
    if existing >= profile.max_instances:
        return []
    return _free(profile.placements, occupied_compute_slices(gi))


def ci_remaining_capacity(gi: SimGpuInstance, profile: CiProfile) -> int:
    """Same rule as for GIs (docs/nvml.md §5), within the GI's compute slices."""
    existing = sum(1 for ci in gi.compute_instances if ci.profile_id == profile.id)
    return min(profile.max_instances - existing, len(free_ci_placements(gi, profile)))


def choose_ci_placement(gi: SimGpuInstance, profile: CiProfile) -> Placement | None:
    """The lowest free legal compute-slice placement [inf: NVIDIA documents no rule for CIs]."""
    candidates = free_ci_placements(gi, profile)
    return min(candidates, key=lambda p: p.start) if candidates else None


def lowest_free_id(used: Iterable[int]) -> int:
    """CI IDs: the lowest free index from 0 within the GI (docs/nvml.md §8)."""
    taken = set(used)
    return next(i for i in range(len(taken) + 1) if i not in taken)
