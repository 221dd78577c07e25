"""The state object's JSON, and the transformations pause/resume/undo make of it."""

from __future__ import annotations

from migagent.rollout.driver import FORGIVE_CURRENT, resumed, undo_state
from migagent.rollout.state import NodeRecord, NodeStatus, Phase, RolloutSpec, RolloutState


def state() -> RolloutState:
    records = [
        NodeRecord("a", NodeStatus.DONE, "new", "old-a", gpus=2, wave=1, predicted=("ml/x",), evicted=("ml/x",)),
        NodeRecord("b", NodeStatus.FAILED, "new", None, gpus=2, wave=2, reason="ApplyFailed: boom", stale_attempt="3"),
        NodeRecord("c", NodeStatus.PENDING, "new", "old-c", gpus=2),
        NodeRecord("d", NodeStatus.SKIPPED, "new", "old-d", reason="no agent has reported"),
    ]
    return RolloutState(
        name="r", spec=RolloutSpec(selector="pool=a", layout="new", max_unavailable="25%", soak_s=5.0),
        layouts="version: v1\n", phase=Phase.HALTED, nodes={r.node: r for r in records}, waves=2,
        holder="me", holder_expires=10.0, reasons=("b: ApplyFailed: boom",),
    )


def test_the_state_round_trips_through_its_json() -> None:
    original = state()
    again = RolloutState.loads(original.dumps(), layouts=original.layouts, resource_version="7")
    assert again == RolloutState(**{**original.__dict__, "resource_version": "7"})


def test_resume_waits_again_on_failed_nodes_forgiving_the_failure_they_show_then() -> None:
    after = resumed(state())
    assert after.phase is Phase.RUNNING
    assert after.reasons == ()
    assert after.nodes["b"].status is NodeStatus.IN_FLIGHT
    assert after.nodes["b"].stale_attempt == FORGIVE_CURRENT  # the failed attempt it shows at the next look


def test_undo_sends_every_relabelled_node_back_and_leaves_the_others() -> None:
    undo = undo_state(state())
    assert {name: (r.status, r.target) for name, r in undo.nodes.items()} == {
        "a": (NodeStatus.PENDING, "old-a"),
        "b": (NodeStatus.PENDING, None),  # it had no layout label: the label is removed
        "c": (NodeStatus.SKIPPED, "new"),
        "d": (NodeStatus.SKIPPED, "new"),
    }
    assert (undo.phase, undo.waves, undo.canary_done_at) == (Phase.RUNNING, 0, None)


def test_another_live_holder_keeps_the_rollout_and_an_expired_one_does_not() -> None:
    held = state()
    assert held.held_by_other("you", now=9.0)
    assert not held.held_by_other("you", now=10.5)
    assert not held.held_by_other("me", now=9.0)
