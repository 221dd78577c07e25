"""--max-unavailable and the wave choice: GPUs (or nodes, or a share), PDBs across a wave's nodes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from migagent.rollout.budget import BudgetSpecError, MaxUnavailable, choose_wave
from migagent.rollout.impact import NodeImpact


@dataclass(frozen=True)
class Budget:
    namespace: str
    name: str
    disruptions_allowed: int | None
    app: str

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return namespace == self.namespace and labels.get("app") == self.app


def node(name: str, gpus: int = 2, evicts: tuple[str, ...] = (), changed: int = 2) -> NodeImpact:
    return NodeImpact(node=name, gpus=gpus, evicts=evicts, gpus_changed=tuple(range(changed)))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8", MaxUnavailable(8, "gpus")), ("8gpus", MaxUnavailable(8, "gpus")), ("2nodes", MaxUnavailable(2, "nodes")),
     ("1node", MaxUnavailable(1, "nodes")), ("25%", MaxUnavailable(25, "percent"))],
)
def test_max_unavailable_counts_gpus_nodes_or_a_share(text: str, expected: MaxUnavailable) -> None:
    assert MaxUnavailable.parse(text) == expected


@pytest.mark.parametrize("text", ["0", "-1", "lots", "150%", "2 racks"])
def test_a_bad_max_unavailable_is_refused_naming_the_flag(text: str) -> None:
    with pytest.raises(BudgetSpecError, match=r"^--max-unavailable .*: give a positive number of GPUs"):
        MaxUnavailable.parse(text)


def test_a_percentage_is_of_the_pools_gpus_rounded_down() -> None:
    assert MaxUnavailable.parse("25%").limit(30) == 7
    assert MaxUnavailable.parse("2nodes").used([node("a", 8), node("b", 4)]) == 2
    assert MaxUnavailable.parse("8").used([node("a", 8), node("b", 4)]) == 12


def test_a_node_bigger_than_the_budget_is_said_with_the_value_that_would_take_it() -> None:
    assert MaxUnavailable.parse("4").too_big(node("big", 8), 16) == (
        "node big has 8 GPUs but --max-unavailable 4 GPUs allows 4 GPU(s) out of service at once;"
        " raise it to at least 8 GPUs"
    )


def test_the_least_disturbing_nodes_go_first_and_the_wave_fills_the_room() -> None:
    candidates = [node("a", evicts=("ml/x",)), node("b", changed=1), node("c"), node("d")]
    choice = choose_wave(candidates, room=4, max_unavailable=MaxUnavailable(4), budgets=[], pod_labels={})
    assert [n.node for n in choice.nodes] == ["b", "c"]
    assert len(choice.held_back) == 2


def test_the_canary_wave_takes_at_most_the_canary_count() -> None:
    choice = choose_wave([node("a"), node("b")], room=8, max_unavailable=MaxUnavailable(8), budgets=[],
                         pod_labels={}, max_nodes=1)
    assert [n.node for n in choice.nodes] == ["a"]


def test_two_nodes_never_draw_one_pdb_past_what_it_allows_together() -> None:
    budgets = [Budget("ml", "inference", 1, "inference")]
    labels = {"ml/i0": {"app": "inference"}, "ml/i1": {"app": "inference"}, "ml/t": {"app": "train"}}
    candidates = [node("a", evicts=("ml/i0",)), node("b", evicts=("ml/i1",)), node("c", evicts=("ml/t",))]
    choice = choose_wave(candidates, room=8, max_unavailable=MaxUnavailable(8), budgets=budgets, pod_labels=labels)
    assert [n.node for n in choice.nodes] == ["a", "c"]
    assert choice.held_back == (
        "b: PodDisruptionBudget ml/inference allows 1 disruption(s), the wave would evict 2",
    )


def test_a_pdb_that_allows_nothing_now_holds_back_every_node_that_would_draw_on_it() -> None:
    budgets = [Budget("ml", "inference", 0, "inference")]
    choice = choose_wave([node("a", evicts=("ml/i0",))], room=8, max_unavailable=MaxUnavailable(8),
                         budgets=budgets, pod_labels={"ml/i0": {"app": "inference"}})
    assert choice.nodes == ()
