"""Smoke test of the planner bench in quick mode: structure only, never timings."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.catalog_bench import QUICK, bench_model
from bench.migparted import flatten_order, unique_ordering_count, unique_orderings
from bench.planner_bench import catalog_table, main, transition_table
from bench.transitions import SUITE, lower_bound, run_transition
from migagent.catalog import Placement, model_by_key
from migagent.layout.desired import DesiredGi, DesiredGpu, DesiredNode
from migagent.layout.observed import Observation, ObservedCi, ObservedGi
from migagent.planning import empty_observation
from migagent.planning.solver import default_gi

A30 = model_by_key("A30-24GB")
A100 = model_by_key("A100-40GB")


def test_our_planner_realises_every_fitting_multiset_of_one_model_in_quick_mode() -> None:
    row = bench_model(A30, QUICK)

    assert row.multisets > 0
    assert row.share(row.ours) == 1.0
    assert row.nvml_first <= row.nvml_retry <= row.multisets
    assert len(row.retry_tries) == row.nvml_retry
    assert all(tries >= 1 for tries in row.retry_tries)
    assert len(row.plan_seconds) == row.multisets * QUICK.plan_repeats
    assert A30.key in catalog_table([row])


def test_our_plan_meets_the_lower_bound_and_mig_parted_resets_the_whole_node_on_an_ampere_mode_change() -> None:
    transition = next(t for t in SUITE if t.name.startswith("A100: MIG on GPU 6"))

    row = run_transition(transition)

    assert row.verified
    assert row.ours_at_bound
    assert row.ours_destroys == row.bound_destroys
    assert (row.ours_resets, row.rebuild_resets) == (2, row.gpus)
    assert row.rebuild_destroys >= row.ours_destroys
    assert transition.name in transition_table([row])


def test_every_suite_transition_keeps_our_plan_at_the_lower_bound() -> None:
    rows = [run_transition(t) for t in SUITE]

    assert len(rows) >= 6
    assert all(row.verified and row.ours_at_bound for row in rows)
    assert all(row.rebuild_destroys >= row.ours_destroys for row in rows)


def _observed_a100(*profile_ids: int) -> Observation:
    """One A100 holding a GI of each profile (default CI), at the lowest free legal placements."""
    table = A100.profiles
    gis = []
    taken: set[int] = set()
    for gi_id, profile_id in enumerate(profile_ids, start=1):
        profile = table.gi_profile(profile_id)
        assert profile is not None
        placement = next(p for p in profile.placements if not p.slots() & taken)
        taken |= placement.slots()
        ci = ObservedCi(
            id=0, profile_id=profile.default_ci.id, placement=Placement(0, profile.slices), uuid=f"MIG-{gi_id}"
        )
        gis.append(ObservedGi(id=gi_id, profile_id=profile_id, placement=placement, compute_instances=(ci,)))
    gpu = dataclasses.replace(empty_observation([A100]).gpus[0], gpu_instances=tuple(gis))
    return Observation(gpus=(gpu,))


def test_lower_bound_counts_the_existing_gis_the_target_does_not_hold() -> None:
    before = _observed_a100(9, 14, 19)  # 3g + 2g + 1g
    target = (default_gi(A100.profiles, 9), default_gi(A100.profiles, 19), default_gi(A100.profiles, 19))

    desired = DesiredNode(gpus=(DesiredGpu(index=0, mig_enabled=True, gpu_instances=target),))

    assert lower_bound(before, desired) == (1, 0)


def test_lower_bound_of_an_ampere_gpu_turning_mig_off_is_all_its_gis_and_one_reset() -> None:
    before = _observed_a100(9, 14)

    assert lower_bound(before, DesiredNode(gpus=(DesiredGpu(index=0, mig_enabled=False),))) == (2, 1)


def test_flatten_order_creates_larger_instances_first_and_media_ones_before_plain_ones() -> None:
    table = A100.profiles
    one_g, one_g_me, two_g, three_g = (default_gi(table, p) for p in (19, 20, 14, 9))

    order = flatten_order(table, [one_g, two_g, one_g_me, three_g])

    assert order == (three_g, two_g, one_g_me, one_g)


@given(st.lists(st.sampled_from([19, 14, 9, 15]), min_size=0, max_size=6))
def test_unique_orderings_visit_each_distinct_ordering_exactly_once(profile_ids: list[int]) -> None:
    items: list[DesiredGi] = [default_gi(A100.profiles, p) for p in profile_ids]

    seen = list(unique_orderings(items))

    assert len(seen) == len(set(seen)) == unique_ordering_count(items)
    expected = math.factorial(len(items))
    for repeats in Counter(items).values():
        expected //= math.factorial(repeats)
    assert len(seen) == expected
    assert all(Counter(ordering) == Counter(items) for ordering in seen)
    if items:
        assert seen[0] == tuple(items)


def test_the_quick_bench_prints_both_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quick", "--models", A30.key]) == 0

    out = capsys.readouterr().out
    assert "(a) GI multisets" in out
    assert "(b) Transitions" in out
    assert A30.key in out
