"""The state object's JSON, and the transformations pause/resume/undo make of it."""

from __future__ import annotations

from dataclasses import replace

from migagent.rollout.budget import MaxUnavailable
from migagent.rollout.codec import decode, encode
from migagent.rollout.scope import FORGIVE_CURRENT, resumed, undo_state
from migagent.rollout.spec import RolloutSpec
from migagent.rollout.state import Layouts, NodeRecord, NodeStatus, Phase, RolloutState
from tests.unit.rollout.cluster import stored

LAYOUT_TEXT = """\
version: v1
mig-configs:
  new:
    - devices: all
      mig-enabled: false
"""


def state() -> RolloutState:
    records = [
        NodeRecord("a", NodeStatus.DONE, "new", "old-a", gpus=2, wave=1, predicted=("ml/x",), evicted=("ml/x",),
                   labelled=True),
        NodeRecord("b", NodeStatus.FAILED, "new", None, gpus=2, wave=2, reason="ApplyFailed: boom", stale_attempt="3",
                   labelled=True),
        NodeRecord("c", NodeStatus.PENDING, "new", "old-c", gpus=2),
        NodeRecord("d", NodeStatus.SKIPPED, "new", "old-d", reason="no agent has reported"),
        NodeRecord("e", NodeStatus.IN_FLIGHT, "new", "old-e", gpus=2, wave=2),
        NodeRecord("f", NodeStatus.DONE, "new", "old-f", gpus=2, wave=1, labelled=True),
    ]
    return RolloutState(
        name="r", spec=RolloutSpec(selector="pool=a", layout="new", max_unavailable=MaxUnavailable(25, "percent"),
                                   soak_s=5.0),
        layouts=Layouts.parse(LAYOUT_TEXT, source="test"), phase=Phase.HALTED, nodes={r.node: r for r in records},
        waves=2, holder="me", holder_expires=10.0, reasons=("b: ApplyFailed: boom",),
    )


def test_the_state_round_trips_through_its_object() -> None:
    original = state()
    again = decode("r", stored(encode(original), "7"))
    assert again == RolloutState(**{**original.__dict__, "resource_version": "7"})


def test_the_spec_and_layouts_are_parsed_once_while_the_object_keeps_them() -> None:
    first = decode("r", stored(encode(state()), "7"))
    again = decode("r", stored(encode(replace(state(), waves=3)), "7"), first)
    assert again.layouts.file is first.layouts.file
    assert again.spec.max_unavailable is first.spec.max_unavailable
    assert again.waves == 3
    changed = decode("r", stored(encode(replace(state(), spec=replace(state().spec, canary=2))), "7"), first)
    assert changed.spec.canary == 2
    assert decode("r", stored(encode(state()), "7")).layouts.file is not first.layouts.file


def test_resume_waits_again_on_failed_nodes_forgiving_the_failure_they_show_then() -> None:
    after = resumed(state())
    assert after.phase is Phase.RUNNING
    assert after.reasons == ()
    assert after.nodes["b"].status is NodeStatus.IN_FLIGHT
    assert after.nodes["b"].stale_attempt == FORGIVE_CURRENT  # the failed attempt it shows at the next look


def test_undo_sends_back_every_node_that_still_carries_the_rollouts_label_and_leaves_the_others() -> None:
    labels = {"a": "new", "b": "new", "c": "old-c", "d": "old-d", "e": "old-e", "f": "admins-choice"}
    undo = undo_state(state(), labels)
    assert {name: (r.status, r.target, r.previous) for name, r in undo.nodes.items()} == {
        "a": (NodeStatus.PENDING, "old-a", "new"),
        "b": (NodeStatus.PENDING, None, "new"),  # it had no layout label: the label is removed
        "c": (NodeStatus.SKIPPED, "new", "old-c"),
        "d": (NodeStatus.SKIPPED, "new", "old-d"),
        "e": (NodeStatus.SKIPPED, "new", "old-e"),  # in flight, never relabelled: nothing to undo
        "f": (NodeStatus.OVERRIDDEN, "new", "old-f"),  # someone else's label since: undo leaves it
    }
    assert "changed by someone else to admins-choice" in undo.nodes["f"].reason
    assert (undo.phase, undo.waves, undo.canary_done_at) == (Phase.RUNNING, 0, None)


def test_undo_takes_back_a_label_the_rollout_wrote_but_had_not_recorded_yet() -> None:
    """A driver killed between the label and its record: the label is the target, so it is the rollout's."""
    undo = undo_state(state(), {"e": "new"})
    assert (undo.nodes["e"].status, undo.nodes["e"].target) == (NodeStatus.PENDING, "old-e")


def test_another_live_holder_keeps_the_rollout_and_an_expired_one_does_not() -> None:
    held = state()
    assert held.held_by_other("you", now=9.0)
    assert not held.held_by_other("you", now=10.5)
    assert not held.held_by_other("me", now=9.0)
