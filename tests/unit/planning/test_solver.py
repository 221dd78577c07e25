from __future__ import annotations

import dataclasses
import itertools

import pytest

from migagent.catalog import all_models, model_by_key
from migagent.catalog.model import GpuModel, Placement, ProfileTable
from migagent.layout.desired import DesiredGi
from migagent.layout.observed import ObservedCi, ObservedGi, ObservedProcess
from migagent.planning.rules import multiset_problem, place_compute_instances
from migagent.planning.solver import (
    closest_fitting,
    default_gi,
    enumerate_fitting_multisets,
    fits,
    placement_problem,
    solve,
)
from tests.unit.planning.brute import brute_fits

MODELS = all_models()
A100 = model_by_key("A100-40GB").profiles
A30 = model_by_key("A30-24GB").profiles


def _gi(table: ProfileTable, profile_id: int, count: int = 1) -> list[DesiredGi]:
    return [default_gi(table, profile_id)] * count


def _existing(table: ProfileTable, profile_id: int, start: int, *, gi_id: int = 1, busy: bool = False) -> ObservedGi:
    profile = table.gi_profile(profile_id)
    assert profile is not None
    ci = profile.default_ci
    processes = (ObservedProcess(pid=7),) if busy else ()
    return ObservedGi(
        id=gi_id,
        profile_id=profile_id,
        placement=Placement(start, profile.memory_slices),
        compute_instances=(ObservedCi(0, ci.id, ci.placements[0], f"MIG-{gi_id}", processes),),
    )


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.key)
def test_the_solver_and_a_brute_force_checker_agree_on_every_multiset_up_to_the_instance_limits(
    model: GpuModel,
) -> None:
    table = model.profiles
    ranges = [range(p.max_instances + 1) for p in table.gi_profiles]
    fitting = {tuple(sorted(gi.profile_id for gi in gis)) for gis in enumerate_fitting_multisets(table)}
    checked = 0
    for counts in itertools.product(*ranges):
        ids = [p.id for p, n in zip(table.gi_profiles, counts, strict=True) for _ in range(n)]
        expected = brute_fits(table, ids)
        assert fits(table, [default_gi(table, i) for i in ids]) == expected, (model.key, ids)
        assert (tuple(sorted(ids)) in fitting) == expected, (model.key, ids)
        checked += 1
    assert checked == len(list(itertools.product(*ranges)))


def test_enumerated_multisets_include_the_empty_layout_and_full_single_profile_layouts() -> None:
    multisets = enumerate_fitting_multisets(A100)
    assert () in multisets
    assert tuple(_gi(A100, 19, 7)) in multisets
    assert tuple(_gi(A100, 9, 2)) in multisets
    assert tuple(_gi(A100, 19, 7) + _gi(A100, 15, 1)) not in multisets
    assert len(multisets) == len(set(multisets))


def test_the_solver_finds_placements_that_naive_creation_order_would_fragment() -> None:
    # The UG's example: 1g, 1g, 2g then 3g fails under driver auto-placement; an exact search fits it.
    desired = _gi(A100, 19, 2) + _gi(A100, 14) + _gi(A100, 9)
    solution = solve(A100, existing=(), desired=desired)
    assert solution is not None
    placements = sorted(p.placement for p in solution.placed)
    assert not any(a.overlaps(b) for a, b in itertools.combinations(placements, 2))


def test_three_1c_compute_instances_in_a_3g_gi_get_placements_0_1_and_2() -> None:
    gi = A100.gi_profile(9)
    assert gi is not None
    assert place_compute_instances(gi, (0, 0, 0)) == ((0, Placement(0, 1)), (0, Placement(1, 1)), (0, Placement(2, 1)))


def test_a_2c_and_a_1c_share_a_3g_gi_with_the_larger_first() -> None:
    gi = A100.gi_profile(9)
    assert gi is not None
    assert place_compute_instances(gi, (0, 1)) == ((1, Placement(0, 2)), (0, Placement(2, 1)))


def test_compute_instances_beyond_the_gi_capacity_are_impossible() -> None:
    gi = A100.gi_profile(9)
    assert gi is not None
    assert place_compute_instances(gi, (0, 0, 0, 0)) is None
    assert place_compute_instances(gi, (1, 1)) is None
    assert place_compute_instances(gi, (2, 0)) is None
    assert place_compute_instances(gi, (99,)) is None


def test_a_layout_with_unplaceable_compute_instances_does_not_fit_and_says_why() -> None:
    desired = [DesiredGi(9, (1, 1))]
    assert not fits(A100, desired)
    problem = multiset_problem(A100, desired)
    assert problem is not None
    assert "3 compute slices" in problem
    assert "2c.3g.20gb (up to 1" in problem


def test_two_media_engine_gis_never_fit_even_across_profiles() -> None:
    desired = [default_gi(A30, 21), default_gi(A30, 6)]  # 1g.6gb+me and 2g.12gb+me: 3 of 4 slices
    problem = placement_problem(A30, desired)
    assert problem is not None
    assert "media engines" in problem
    assert fits(A30, [default_gi(A30, 21), default_gi(A30, 5)])


def test_an_unknown_gi_profile_id_is_named_with_what_the_gpu_offers() -> None:
    problem = multiset_problem(A100, [DesiredGi(42, (0,))])
    assert problem is not None
    assert "42" in problem
    assert "3g.20gb (id 9)" in problem


def test_the_solver_keeps_the_existing_3g_when_two_3g_become_3g_2g_1g() -> None:
    existing = [_existing(A100, 9, 0, gi_id=2), _existing(A100, 9, 4, gi_id=1)]
    solution = solve(A100, existing=existing, desired=_gi(A100, 9) + _gi(A100, 14) + _gi(A100, 19))
    assert solution is not None
    assert [gi.placement for gi in solution.kept] == [Placement(0, 4)]
    assert [gi.placement for gi in solution.destroyed] == [Placement(4, 4)]
    assert sorted(p.placement for p in solution.created) == [Placement(4, 2), Placement(6, 1)]


def test_among_equally_many_keepable_gis_the_one_running_processes_is_kept() -> None:
    existing = [_existing(A100, 9, 0, gi_id=2), _existing(A100, 9, 4, gi_id=1, busy=True)]
    solution = solve(A100, existing=existing, desired=_gi(A100, 9) + _gi(A100, 14) + _gi(A100, 19))
    assert solution is not None
    assert [gi.placement for gi in solution.kept] == [Placement(4, 4)]


def test_a_gi_whose_compute_instances_differ_is_not_kept() -> None:
    existing = [_existing(A100, 9, 0)]
    solution = solve(A100, existing=existing, desired=[DesiredGi(9, (0, 0, 0))])
    assert solution is not None
    assert solution.kept == ()
    assert solution.destroyed == tuple(existing)


def test_the_solver_returns_none_when_nothing_fits() -> None:
    assert solve(A100, existing=(), desired=_gi(A100, 9, 2) + _gi(A100, 14)) is None


def test_the_closest_fitting_layout_drops_the_fewest_and_smallest_instances() -> None:
    closest = closest_fitting(A100, _gi(A100, 9, 2) + _gi(A100, 14))
    assert closest == tuple(_gi(A100, 9, 2))
    closest = closest_fitting(A100, _gi(A100, 19, 7) + _gi(A100, 0))
    assert closest == tuple(_gi(A100, 19, 7))


def test_the_closest_fitting_layout_keeps_the_gis_split_into_more_compute_instances() -> None:
    # "1c.3g.20gb": 7 packs as 3g GIs holding 3, 3 and 1 CIs; only two 3g GIs fit.
    split_in_three = DesiredGi(9, (0, 0, 0))
    closest = closest_fitting(A100, [split_in_three, split_in_three, DesiredGi(9, (0,))])
    assert closest == (split_in_three, split_in_three)


def test_the_closest_fitting_layout_of_a_fitting_layout_is_itself() -> None:
    desired = _gi(A100, 14) + _gi(A100, 9)
    assert sorted(closest_fitting(A100, desired)) == sorted(desired)


def _with_media_variants(table: ProfileTable) -> ProfileTable:
    """A100's table plus a 1g+me.all (enum 0xF) and a 1g-me (enum 0xD) profile, as Blackwell-era tables list."""
    one_g = table.gi_profile(19)
    assert one_g is not None
    me_all = dataclasses.replace(one_g, id=101, enum_value=0xF, max_instances=1)
    no_me = dataclasses.replace(one_g, id=102, enum_value=0xD)
    return dataclasses.replace(table, gi_profiles=(*table.gi_profiles, me_all, no_me))


def test_a_me_all_gi_shares_the_gpu_only_with_no_me_gis() -> None:
    table = _with_media_variants(A100)
    assert fits(table, [default_gi(table, 101), default_gi(table, 102), default_gi(table, 102)])
    problem = placement_problem(table, [default_gi(table, 101), default_gi(table, 19)])
    assert problem is not None
    assert "only with -me GIs" in problem
    assert not fits(table, [default_gi(table, 101), default_gi(table, 20)])
