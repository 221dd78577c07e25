"""The planner's objective is lexicographic: fewest pods evicted (GIs with workloads), then fewest
GIs destroyed. Checked on a case where keeping the most GIs would evict a pod, and against an
exhaustive search over every legal packing."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence

import pytest

from migagent.catalog import model_by_key
from migagent.catalog.model import Placement, ProfileTable
from migagent.layout.desired import DesiredGi
from migagent.layout.observed import ObservedCi, ObservedGi, ObservedProcess
from migagent.planning.solver import default_gi, solve
from tests.unit.planning.brute import all_packings

A100 = model_by_key("A100-40GB").profiles
H100 = model_by_key("H100-80GB-SXM").profiles


def _existing(table: ProfileTable, profile_id: int, start: int, *, busy: bool = False) -> ObservedGi:
    profile = table.gi_profile(profile_id)
    assert profile is not None
    ci = profile.default_ci
    processes = (ObservedProcess(pid=7),) if busy else ()
    return ObservedGi(
        id=start + 1,
        profile_id=profile_id,
        placement=Placement(start, profile.memory_slices),
        compute_instances=(ObservedCi(0, ci.id, ci.placements[0], f"MIG-{profile_id}-{start}", processes),),
    )


def _desired(table: ProfileTable, *profile_ids: int) -> list[DesiredGi]:
    return [default_gi(table, i) for i in profile_ids]


def _evicted(existing: Sequence[ObservedGi], destroyed: Sequence[ObservedGi], pods: Mapping[Placement, int]) -> int:
    return sum(pods.get(gi.placement, 0) for gi in destroyed)


def test_a_busy_1g_is_kept_even_though_keeping_three_idle_1g_would_keep_more_gis() -> None:
    # 1g at 0 holds a pod; 1g at 4, 5, 6 are idle. Desired: one 3g and three 1g. A 3g at 0 keeps the
    # three idle GIs but evicts the pod; a 3g at 4 keeps only the busy one: the pod stays.
    existing = [_existing(A100, 19, 0), _existing(A100, 19, 4), _existing(A100, 19, 5), _existing(A100, 19, 6)]
    pods = {Placement(0, 1): 1}
    solution = solve(A100, existing=existing, desired=_desired(A100, 9, 19, 19, 19), workloads=pods)
    assert solution is not None
    assert [gi.placement for gi in solution.kept] == [Placement(0, 1)]
    assert _evicted(existing, solution.destroyed, pods) == 0
    without_pods = solve(A100, existing=existing, desired=_desired(A100, 9, 19, 19, 19))
    assert without_pods is not None
    assert len(without_pods.kept) == 3  # with no workload known, the most GIs stay (and the pod would go)


def test_a_gi_nvml_sees_processes_on_counts_as_a_workload_without_podresources() -> None:
    existing = [
        _existing(A100, 19, 0, busy=True),
        _existing(A100, 19, 4),
        _existing(A100, 19, 5),
        _existing(A100, 19, 6),
    ]
    solution = solve(A100, existing=existing, desired=_desired(A100, 9, 19, 19, 19))
    assert solution is not None
    assert [gi.placement for gi in solution.kept] == [Placement(0, 1)]


def _brute_best(
    table: ProfileTable, existing: Sequence[ObservedGi], desired: Sequence[DesiredGi], pods: Mapping[Placement, int]
) -> tuple[int, int]:
    """(fewest pods evicted, then fewest GIs destroyed) over every legal packing: an exhaustive search."""
    best: tuple[int, int] | None = None
    for packing in all_packings(table, [gi.profile_id for gi in desired]):
        targets = {(profile_id, p) for profile_id, placements in packing.items() for p in placements}
        destroyed = [e for e in existing if (e.profile_id, e.placement) not in targets]
        score = (_evicted(existing, destroyed, pods), len(destroyed))
        best = score if best is None else min(best, score)
    assert best is not None
    return best


def _random_layout(table: ProfileTable, rng: random.Random) -> list[tuple[int, Placement]]:
    """A random legal set of GIs (default CIs), built by adding random placements that still fit."""
    taken: list[tuple[int, Placement]] = []
    options = [
        (p.id, placement) for p in table.gi_profiles if not p.media.name.startswith("ME") for placement in p.placements
    ]
    rng.shuffle(options)
    for profile_id, placement in options:
        candidate = [*taken, (profile_id, placement)]
        ids = [i for i, _ in candidate]
        if any(placement.overlaps(p) for _, p in taken):
            continue
        if next(all_packings(table, ids), None) is not None:
            taken = candidate
    return taken


@pytest.mark.parametrize("seed", range(40))
def test_the_solver_evicts_no_more_pods_and_destroys_no_more_gis_than_an_exhaustive_search(seed: int) -> None:
    rng = random.Random(seed)
    table = rng.choice([A100, H100])
    before = _random_layout(table, rng)
    existing = [_existing(table, profile_id, p.start) for profile_id, p in before]
    pods = {p: rng.choice([0, 0, 1, 2]) for _, p in before}
    after = _random_layout(table, rng)
    desired = _desired(table, *(profile_id for profile_id, _ in after))
    solution = solve(table, existing=existing, desired=desired, workloads=pods)
    assert solution is not None
    got = (_evicted(existing, solution.destroyed, pods), len(solution.destroyed))
    assert got == _brute_best(table, existing, desired, pods)


def test_the_random_suite_has_cases_where_only_the_workload_objective_keeps_pods() -> None:
    # Without this, the comparison above could pass on cases where keeping the most GIs is enough.
    differs = 0
    for seed in range(40):
        rng = random.Random(seed)
        table = rng.choice([A100, H100])
        before = _random_layout(table, rng)
        existing = [_existing(table, profile_id, p.start) for profile_id, p in before]
        pods = {p: rng.choice([0, 0, 1, 2]) for _, p in before}
        desired = _desired(table, *(profile_id for profile_id, _ in _random_layout(table, rng)))
        plain = solve(table, existing=existing, desired=desired)
        assert plain is not None
        differs += _evicted(existing, plain.destroyed, pods) > _brute_best(table, existing, desired, pods)[0]
    assert differs >= 1


def test_the_exhaustive_search_itself_is_exhaustive_on_a_tiny_case() -> None:
    placements = set(itertools.chain.from_iterable(packing[19] for packing in all_packings(A100, [19])))
    assert placements == {Placement(i, 1) for i in range(7)}
