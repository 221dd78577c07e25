"""--max-unavailable and the wave choice: GPUs (or nodes, or a share), the room it leaves, PDBs across a
wave's nodes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from migagent.rollout.budget import BudgetSpecError, MaxUnavailable, Room, choose_wave
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
def test_a_bad_max_unavailable_is_refused_naming_the_value_and_what_is_valid(text: str) -> None:
    with pytest.raises(BudgetSpecError, match=r"^'.*': give a positive number of GPUs"):
        MaxUnavailable.parse(text)


@pytest.mark.parametrize("text", ["8", "2nodes", "25%"])
def test_the_flag_form_parses_back_to_the_same_budget(text: str) -> None:
    assert MaxUnavailable.parse(MaxUnavailable.parse(text).flag) == MaxUnavailable.parse(text)


def test_a_percentage_is_of_the_pools_gpus_rounded_down() -> None:
    assert Room(MaxUnavailable.parse("25%"), 30).limit == 7
    assert MaxUnavailable.parse("2nodes").used([node("a", 8), node("b", 4)]) == 2
    assert MaxUnavailable.parse("8").used([node("a", 8), node("b", 4)]) == 12


def test_the_room_takes_a_wave_only_beside_what_is_held_out_of_service_already() -> None:
    room = Room(MaxUnavailable(4), 16, held=(node("failed", 2),))
    assert room.takes([node("a", 2)])
    assert not room.takes([node("a", 2), node("b", 2)])
    assert Room(MaxUnavailable(2, "nodes"), 16, held=(node("failed", 8),)).takes([node("a", 8)])


def test_a_node_bigger_than_the_budget_is_said_with_the_value_that_would_take_it() -> None:
    room = Room(MaxUnavailable.parse("4"), 16, held=(node("failed", 4),))
    assert room.never_takes(node("fits", 4)) is None  # alone it fits: only the held node is in its way
    assert room.never_takes(node("big", 8)) == (
        "node big has 8 GPUs but --max-unavailable 4 GPUs allows 4 GPU(s) out of service at once;"
        " raise it to at least 8 GPUs"
    )


def test_the_least_disturbing_nodes_go_first_and_the_wave_fills_the_room() -> None:
    candidates = [node("a", evicts=("ml/x",)), node("b", changed=1), node("c"), node("d")]
    choice = choose_wave(candidates, room=Room(MaxUnavailable(4), 8), budgets=[], pod_labels={})
    assert [n.node for n in choice.nodes] == ["b", "c"]
    assert len(choice.held_back) == 2


def test_the_canary_wave_takes_at_most_the_canary_count() -> None:
    choice = choose_wave([node("a"), node("b")], room=Room(MaxUnavailable(8), 8), budgets=[],
                         pod_labels={}, max_nodes=1)
    assert [n.node for n in choice.nodes] == ["a"]


def test_two_nodes_never_draw_one_pdb_past_what_it_allows_together() -> None:
    budgets = [Budget("ml", "inference", 1, "inference")]
    labels = {"ml/i0": {"app": "inference"}, "ml/i1": {"app": "inference"}, "ml/t": {"app": "train"}}
    candidates = [node("a", evicts=("ml/i0",)), node("b", evicts=("ml/i1",)), node("c", evicts=("ml/t",))]
    choice = choose_wave(candidates, room=Room(MaxUnavailable(8), 8), budgets=budgets, pod_labels=labels)
    assert [n.node for n in choice.nodes] == ["a", "c"]
    assert choice.held_back == (
        "b: PodDisruptionBudget ml/inference allows 1 disruption(s), the wave would evict 2",
    )


def test_a_pdb_that_allows_nothing_now_holds_back_every_node_that_would_draw_on_it() -> None:
    budgets = [Budget("ml", "inference", 0, "inference")]
    choice = choose_wave([node("a", evicts=("ml/i0",))], room=Room(MaxUnavailable(8), 8),
                         budgets=budgets, pod_labels={"ml/i0": {"app": "inference"}})
    assert choice.nodes == ()
