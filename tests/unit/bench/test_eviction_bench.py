"""The eviction bench runs and our plans evict no more pods than its exhaustive bound (structure only)."""

from __future__ import annotations

import pytest

from bench.eviction_bench import PATTERNS, run
from bench.transitions import SUITE

TWO_3G_TO_MIXED = next(t for t in SUITE if t.name.startswith("H100: 2x3g"))


@pytest.mark.parametrize("pattern", PATTERNS)
def test_our_plan_evicts_the_fewest_pods_any_packing_could_and_reaches_the_target(pattern: str) -> None:
    row = run(TWO_3G_TO_MIXED, pattern)
    assert row.verified
    assert row.evicted == row.bound
    assert row.max_keep_evicted >= row.evicted


def test_on_the_adversarial_pattern_keeping_the_most_gis_evicts_a_pod_our_plan_keeps() -> None:
    row = run(TWO_3G_TO_MIXED, "adversarial")
    assert row.max_keep_evicted > row.evicted
