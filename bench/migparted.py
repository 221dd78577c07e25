"""mig-parted's way of building a GPU, emulated on FakeNvml, and its whole-node cost model.

Per docs/mig-parted.md §5 (and mig-parted's pkg/mig/config/config.go,
cmd/nvidia-mig-parted/apply/mode.go): instances are created in `Flatten` order (G descending, C
descending, attribute string descending) with `CreateGpuInstance`, i.e. without a placement, so
NVML picks one (docs/nvml.md §6; FakeNvml follows the inferred rule there). When a creation fails
the GPU is cleared and the next unique permutation is tried, in the order of mig-parted's
swap-based recursion.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pynvml

from migagent.catalog.model import ProfileTable
from migagent.layout.desired import DesiredGi, DesiredNode
from migagent.layout.observed import Observation, ObservedGi
from migagent.layout.profile import gi_profile_name
from migagent.planning.naming import ci_name
from migagent.sim.fake_nvml import FakeNvml


def _flatten_compare(table: ProfileTable, a: DesiredGi, b: DesiredGi, *, more_memory_first: bool) -> int:
    """-1 when `a` is created before `b`.

    Flatten compares G, C and attributes only; profiles equal in those (1g.10gb and 1g.5gb) stay in
    Go's map iteration order, which is random. `more_memory_first` fixes that tie either way.
    """
    pa, pb = table.gi_profile(a.profile_id), table.gi_profile(b.profile_id)
    assert pa is not None
    assert pb is not None
    na, nb = gi_profile_name(pa, table), gi_profile_name(pb, table)
    key_a = (-na.g, -na.c)
    key_b = (-nb.g, -nb.c)
    if key_a != key_b:
        return -1 if key_a < key_b else 1
    attr_a, attr_b = na.media.value.lstrip("+"), nb.media.value.lstrip("+")
    if attr_a != attr_b:
        return -1 if attr_a > attr_b else 1  # Flatten puts the larger attribute string first
    by_memory = (nb.gb > na.gb) - (nb.gb < na.gb)
    return by_memory if more_memory_first else -by_memory


def flatten_order(
    table: ProfileTable, gis: Sequence[DesiredGi], *, more_memory_first: bool = True
) -> tuple[DesiredGi, ...]:
    """mig-parted's creation order: G descending, C descending, attribute string descending."""

    def compare(a: DesiredGi, b: DesiredGi) -> int:
        return _flatten_compare(table, a, b, more_memory_first=more_memory_first)

    return tuple(sorted(gis, key=functools.cmp_to_key(compare)))


def unique_orderings(items: Sequence[DesiredGi]) -> Iterator[tuple[DesiredGi, ...]]:
    """Every distinct ordering, first the given one, in the order mig-parted's recursion visits them."""
    work = list(items)

    def visit(i: int) -> Iterator[tuple[DesiredGi, ...]]:
        if i >= len(work):
            yield tuple(work)
            return
        for j in range(i, len(work)):
            if work[j] in work[i:j]:
                continue  # the same profile already took position i in this branch
            work[i], work[j] = work[j], work[i]
            yield from visit(i + 1)
            work[i], work[j] = work[j], work[i]

    return visit(0)


def unique_ordering_count(items: Sequence[DesiredGi]) -> int:
    count = 1
    for n in range(2, len(items) + 1):
        count *= n
    for repeats in Counter(items).values():
        for n in range(2, repeats + 1):
            count //= n
    return count


def create_without_placement(fake: FakeNvml, gpu: int, ordering: Sequence[DesiredGi]) -> bool:
    """One mig-parted attempt: create each GI (NVML places it) and its CIs. On failure the GPU is cleared.

    On success the instances stay; the caller checks them and clears with `clear_gpu`.
    """
    device = fake.nvmlDeviceGetHandleByIndex(gpu)
    try:
        for gi in ordering:
            handle = fake.nvmlDeviceCreateGpuInstance(device, gi.profile_id)
            for ci_profile_id in gi.ci_profile_ids:
                fake.nvmlGpuInstanceCreateComputeInstance(handle, ci_profile_id)
    except pynvml.NVMLError:
        clear_gpu(fake, gpu)
        return False
    return True


def clear_gpu(fake: FakeNvml, gpu: int) -> None:
    """mig-parted's ClearMigConfig: every CI, then its GI, for every GI on the GPU.

    The ids to walk are read from the simulator's state (shorter than NVML's list calls); the
    destroys themselves are pynvml calls, so FakeNvml checks and records them.
    """
    device = fake.nvmlDeviceGetHandleByIndex(gpu)
    for gi_state in list(fake.state.gpus[gpu].gpu_instances):
        gi = fake.nvmlDeviceGetGpuInstanceById(device, gi_state.id)
        for ci_state in list(gi_state.compute_instances):
            fake.nvmlComputeInstanceDestroy(fake.nvmlGpuInstanceGetComputeInstanceById(gi, ci_state.id))
        fake.nvmlGpuInstanceDestroy(gi)


@dataclass(frozen=True)
class RebuildCost:
    gis_destroyed: int
    gpus_reset: int


def _mig_device_names(table: ProfileTable | None, gis: Sequence[ObservedGi | DesiredGi]) -> Counter[str]:
    """mig-parted's MigConfig: how many CIs of each profile name (its `GetMigConfig` equality)."""
    if table is None:
        return Counter()
    return Counter(ci_name(table, table.gi_profile(gi.profile_id), ci) for gi in gis for ci in gi.ci_profile_ids)


def rebuild_cost(before: Observation, desired: DesiredNode) -> RebuildCost:
    """What mig-parted's apply destroys and resets going from `before` to `desired`.

    Mode phase (runs when any selected GPU's mode differs): every selected GPU with MIG on is
    cleared (apply/mode.go clears before SetMigMode, whether or not that GPU's mode changes); if
    any GPU is then pending (Ampere), all GPUs of the node are reset, wiping what is left. Config
    phase: every selected GPU whose MIG-device counts differ is cleared and rebuilt.
    """
    alive = {gpu.index: len(gpu.gpu_instances) for gpu in before.gpus}
    destroyed = 0
    resets = 0
    selected = [(before.gpu(want.index), want) for want in desired.gpus]
    changing = [(gpu, want) for gpu, want in selected if gpu.mig_capable and gpu.mig_current != want.mig_enabled]
    if changing:
        for gpu, _ in selected:
            if gpu.mig_current:
                destroyed += alive[gpu.index]
                alive[gpu.index] = 0
        if any(gpu.mode_change_needs_reset for gpu, _ in changing):
            resets = len(before.gpus)
            destroyed += sum(alive.values())
            alive = dict.fromkeys(alive, 0)
    for gpu, want in selected:
        if not want.mig_enabled or alive[gpu.index] == 0:
            continue
        if _mig_device_names(gpu.profiles, gpu.gpu_instances) != _mig_device_names(gpu.profiles, want.gpu_instances):
            destroyed += alive[gpu.index]
    return RebuildCost(gis_destroyed=destroyed, gpus_reset=resets)
