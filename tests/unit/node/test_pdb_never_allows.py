"""Which PodDisruptionBudgets can never allow an eviction (the gate refuses) and which only block for now."""

from __future__ import annotations

import pytest

from migagent.node.budgets import PdbView, SelectorRequirement


@pytest.mark.parametrize(
    ("min_available", "max_unavailable", "expected_pods", "never"),
    [
        (None, 0, 3, True),
        (None, "0%", 3, True),
        (3, None, 3, True),
        (4, None, 3, True),
        ("100%", None, 3, True),
        (2, None, 3, False),
        (None, 1, 3, False),
        ("50%", None, 3, False),
        (1, None, None, False),  # the disruption controller has not counted the pods yet: not refused
    ],
)
def test_max_unavailable_zero_or_min_available_equal_to_the_expected_pods_never_allows(
    min_available: int | str | None, max_unavailable: int | str | None, expected_pods: int | None, never: bool
) -> None:
    budget = PdbView(
        "ml",
        "pdb",
        match_labels={"app": "x"},
        min_available=min_available,
        max_unavailable=max_unavailable,
        expected_pods=expected_pods,
        disruptions_allowed=0,
    )
    assert (budget.never_allows() is not None) == never


def test_a_budget_selects_by_labels_and_expressions_in_its_own_namespace_only() -> None:
    budget = PdbView(
        "ml",
        "pdb",
        match_labels={"app": "x"},
        match_expressions=(SelectorRequirement("tier", "In", ("gpu",)), SelectorRequirement("canary", "DoesNotExist")),
    )
    assert budget.selects("ml", {"app": "x", "tier": "gpu"})
    assert not budget.selects("other", {"app": "x", "tier": "gpu"})
    assert not budget.selects("ml", {"app": "x", "tier": "cpu"})
    assert not budget.selects("ml", {"app": "x", "tier": "gpu", "canary": "1"})
    assert not PdbView("ml", "no-selector").selects("ml", {"app": "x"})


@pytest.mark.parametrize(
    ("min_available", "expected_pods", "never"),
    [("50%", 1, True), ("50%", 2, False), ("67%", 3, True), ("66%", 3, False), ("1%", 1, True), ("0%", 5, False)],
)
def test_a_percentage_min_available_is_scaled_rounding_up_like_the_disruption_controller(
    min_available: str, expected_pods: int, never: bool
) -> None:
    budget = PdbView("ml", "pdb", match_labels={}, min_available=min_available, expected_pods=expected_pods)
    assert (budget.never_allows() is not None) == never


def test_always_allow_lets_an_unready_pod_past_a_budget_that_never_allows_a_ready_one() -> None:
    budget = PdbView(
        "ml", "pdb", match_labels={}, max_unavailable=0, unhealthy_pod_eviction_policy="AlwaysAllow", expected_pods=1
    )
    assert budget.never_allows(pod_ready=True) is not None
    assert budget.never_allows(pod_ready=False) is None
    strict = PdbView("ml", "pdb", match_labels={}, max_unavailable=0, unhealthy_pod_eviction_policy="IfHealthyBudget")
    assert strict.never_allows(pod_ready=False) is not None
