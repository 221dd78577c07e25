"""The driver against an in-memory cluster (no HTTP, no threads, a fake clock): relabel once across
lost writes and a killed driver, the lease, a resume that forgives only the old failure, a label
someone else set (left alone, said, never undone), and a state object it cannot read (nothing relabelled)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from migagent.clock import FakeClock
from migagent.node.names import ATTEMPT_ANNOTATION, CONDITION_TYPE, MIG_CONFIG_STATE_LABEL
from migagent.node.port import NodeCondition
from migagent.rollout.codec import decode, encode
from migagent.rollout.driver import RolloutDriver
from migagent.rollout.errors import AlreadyStartedError, CorruptStateError, HeldElsewhereError
from migagent.rollout.ownership import EVENT_REASON
from migagent.rollout.port import create
from migagent.rollout.scope import resumed, undo_state
from migagent.rollout.state import NodeStatus, Phase
from tests.unit.rollout.cluster import Cluster, Killed, Quiet, first_state, started


def driver(cluster: Cluster, clock: FakeClock, holder: str = "one", listener: Quiet | None = None) -> RolloutDriver:
    return RolloutDriver(cluster, "r", clock=clock, listener=listener or Quiet(), holder=holder, poll_s=1.0)


def stored_state(cluster: Cluster) -> dict[str, object]:
    assert cluster.state is not None
    loaded: dict[str, object] = json.loads(cluster.state.data["state"])
    return loaded


def test_lost_state_writes_are_read_again_and_each_node_is_still_relabelled_once() -> None:
    cluster = Cluster(["a", "b", "c", "d"])
    started(cluster)
    cluster.lose_writes = 5
    final = driver(cluster, FakeClock()).run()
    assert final.phase is Phase.DONE
    assert cluster.relabels == dict.fromkeys("abcd", 1)


def test_a_driver_killed_between_the_wave_and_its_labels_is_resumed_by_the_next_after_its_lease() -> None:
    cluster = Cluster(["a", "b", "c", "d", "e"])
    started(cluster)
    clock = FakeClock()
    cluster.kill_after_relabels = 2  # the canary and one node of wave 2 relabelled, then the process dies
    with pytest.raises(Killed):
        driver(cluster, clock, "one").run()
    with pytest.raises(HeldElsewhereError, match="is driven by one"):
        driver(cluster, clock, "two").step()
    clock.advance(10.0)
    final = driver(cluster, clock, "two").run()
    assert final.phase is Phase.DONE
    assert cluster.relabels == dict.fromkeys("abcde", 1)
    assert {r.status for r in final.nodes.values()} == {NodeStatus.DONE}  # its own labels, not someone else's


def test_a_resume_forgives_the_failure_it_saw_and_halts_again_only_on_a_new_one() -> None:
    cluster = Cluster(["a", "b", "c"])
    started(cluster, max_unavailable=first_state(cluster).spec.max_unavailable.parse("2"))
    cluster.failing.add("b")
    clock = FakeClock()
    halted = driver(cluster, clock).run()
    assert halted.phase is Phase.HALTED
    assert [r.node for r in halted.in_status(NodeStatus.FAILED)] == ["b"]

    # b's agent retried (and failed) while the rollout was halted; then the fault is cleared and the
    # rollout resumed while b still shows that later failed attempt: forgiven, not a new failure.
    cluster.agents_look(retry_failed=True)
    cluster.failing.discard("b")
    assert cluster.state is not None
    state = decode("r", cluster.state)
    cluster.replace_state("r", encode(resumed(state)), state.resource_version)
    final = driver(cluster, clock).run()
    assert final.phase is Phase.DONE
    assert cluster.relabels == dict.fromkeys("abc", 1)


def test_a_resume_forgives_the_attempt_in_flight_that_met_the_fault_before_it_was_cleared() -> None:
    """Issue 37 item 9: `migagent demo rollout` halted again after its fault was cleared (1 run in 4):
    the agent's retry met the fault, the fault was cleared and the rollout resumed while that retry was
    still undoing (state pending), and its failure, reported after the resume's first look, counted as new."""
    cluster = Cluster(["a", "b", "c"])
    started(cluster, max_unavailable=first_state(cluster).spec.max_unavailable.parse("2"))
    cluster.failing.add("b")
    clock = FakeClock()
    assert driver(cluster, clock).run().phase is Phase.HALTED
    failed = cluster.nodes["b"]
    retry = int(failed.annotations[ATTEMPT_ANNOTATION]) + 1
    marker = json.dumps({"attempt": retry, "layout": "all-balanced", "startedAt": clock.wall()})
    cluster.nodes["b"] = replace(  # the retry in flight: it calls NVML before the fault is cleared
        failed, labels={**failed.labels, MIG_CONFIG_STATE_LABEL: "pending"},
        annotations={**failed.annotations, ATTEMPT_ANNOTATION: marker},
        conditions=(NodeCondition(CONDITION_TYPE, "False", "Reconfiguring", "applying"),),
    )
    cluster.failing.discard("b")
    assert cluster.state is not None
    state = decode("r", cluster.state)
    cluster.replace_state("r", encode(resumed(state)), state.resource_version)
    driver(cluster, clock).step()  # the resume's first look: b is still working on that retry
    cluster.nodes["b"] = replace(failed, annotations={**failed.annotations, ATTEMPT_ANNOTATION: str(retry)})

    final = driver(cluster, clock).run()
    assert final.phase is Phase.DONE, final.reasons
    assert cluster.relabels == dict.fromkeys("abc", 1)


def test_a_fault_not_cleared_halts_the_resumed_rollout_again_on_the_next_failed_attempt() -> None:
    cluster = Cluster(["a", "b", "c"])
    started(cluster, max_unavailable=first_state(cluster).spec.max_unavailable.parse("2"))
    cluster.failing.add("b")
    clock = FakeClock()
    assert driver(cluster, clock).run().phase is Phase.HALTED
    assert cluster.state is not None
    state = decode("r", cluster.state)
    cluster.replace_state("r", encode(resumed(state)), state.resource_version)
    again = driver(cluster, clock).run()
    assert again.phase is Phase.HALTED
    assert [r.node for r in again.in_status(NodeStatus.PENDING)] == ["c"]


def test_a_failed_canary_halts_whatever_the_failure_budget() -> None:
    cluster = Cluster(["a", "b", "c"])
    started(cluster, failure_budget=5)
    cluster.failing.add("a")  # the canary (fewest evictions, then by name)
    halted = driver(cluster, FakeClock()).run()
    assert halted.phase is Phase.HALTED
    assert [r.node for r in halted.in_status(NodeStatus.FAILED)] == ["a"]
    assert cluster.relabels == {"a": 1}


# --- a label someone else set ---------------------------------------------------------------------


def test_a_node_relabelled_by_someone_else_mid_change_is_left_alone_said_and_never_undone() -> None:
    cluster = Cluster(["a", "b", "c"])
    started(cluster)
    clock = FakeClock()
    listener = Quiet()
    driver(cluster, clock, listener=listener).step()  # the canary, a, is relabelled
    assert cluster.relabels == {"a": 1}
    cluster.someone_sets("a", "all-disabled")  # an admin, by hand, while a's change runs
    final = driver(cluster, clock, listener=listener).run()

    assert final.phase is Phase.DONE
    assert cluster.label("a") == "all-disabled"  # not overwritten
    assert cluster.relabels == {"a": 1, "b": 1, "c": 1}
    left = final.nodes["a"]
    assert left.status is NodeStatus.OVERRIDDEN
    assert "changed by someone else to all-disabled" in left.reason
    assert [(node, reason) for node, reason, _ in cluster.events] == [("a", EVENT_REASON)]
    assert [fields["node"] for name, fields in listener.events if name == "node_left_alone"] == ["a"]

    labels = {name: cluster.label(name) for name in cluster.nodes}
    assert cluster.state is not None
    undo = undo_state(decode("r", cluster.state), labels)
    cluster.replace_state("r", encode(undo), cluster.state.resource_version)
    undone = driver(cluster, clock).run()
    assert undone.phase is Phase.DONE
    assert cluster.label("a") == "all-disabled"  # the admin's label survives the undo
    assert (cluster.label("b"), cluster.label("c")) == ("all-1g.10gb", "all-1g.10gb")


def test_a_pending_node_someone_else_relabels_before_its_wave_is_never_relabelled() -> None:
    cluster = Cluster(["a", "b"])
    started(cluster)
    cluster.someone_sets("b", "all-balanced")  # even to the rollout's own target: it was not the rollout's write
    final = driver(cluster, FakeClock()).run()
    assert cluster.relabels == {"a": 1}
    assert final.nodes["b"].status is NodeStatus.OVERRIDDEN


def test_a_label_changed_between_the_drivers_read_and_its_write_is_not_overwritten() -> None:
    cluster = Cluster(["a", "b"])
    started(cluster)
    clock = FakeClock()
    real_list = cluster.list_nodes

    def list_then_someone_relabels(selector: str) -> list[object]:
        listed = real_list(selector)
        cluster.someone_sets("a", "all-disabled")  # after the driver read a, before it writes a's label
        cluster.list_nodes = real_list  # type: ignore[method-assign]
        return listed  # type: ignore[return-value]

    cluster.list_nodes = list_then_someone_relabels  # type: ignore[assignment,method-assign]
    final = driver(cluster, clock).run()
    assert cluster.label("a") == "all-disabled"
    assert cluster.relabels["a"] == 0
    assert final.nodes["a"].status is NodeStatus.OVERRIDDEN


# --- two starts, a state it cannot read -----------------------------------------------------------


def test_of_two_starts_that_found_no_object_the_second_is_told_who_drives() -> None:
    cluster = Cluster(["a"])
    create(cluster, first_state(cluster), holder="host-a/11/aaaa", now=0.0)
    with pytest.raises(AlreadyStartedError) as lost:
        create(cluster, first_state(cluster), holder="host-b/22/bbbb", now=0.0)
    assert str(lost.value) == (
        "rollout r: another driver has just started it and drives it: host-a/11/aaaa"
        " (follow it with `migagent rollout status r`)"
    )
    assert stored_state(cluster)["holder"] == "host-a/11/aaaa"


def test_a_start_that_loses_to_a_detached_start_says_a_controller_drives_it() -> None:
    cluster = Cluster(["a"])
    create(cluster, first_state(cluster), holder=None, now=0.0)
    with pytest.raises(AlreadyStartedError, match="another `migagent rollout start --detach` has just created it"):
        create(cluster, first_state(cluster), holder="host-b/22/bbbb", now=0.0)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda s: s["nodes"]["b"].update(status="relabelling"), "state.nodes.b.status: \"relabelling\" is not one of"),
        (lambda s: s["nodes"]["b"].update(target="all-7g"), "state.nodes.b.target: \"all-7g\" is not a layout"),
    ],
    ids=["unknown-status", "target-not-in-layouts"],
)
def test_a_state_it_cannot_read_stops_the_driver_before_any_relabel(edit: object, said: str) -> None:
    cluster = Cluster(["a", "b"])
    started(cluster)
    assert cluster.state is not None
    data = json.loads(cluster.state.data["state"])
    edit(data)  # type: ignore[operator]
    cluster.state.data = {**cluster.state.data, "state": json.dumps(data)}
    with pytest.raises(CorruptStateError, match=said):
        driver(cluster, FakeClock()).run()
    assert cluster.relabels == {}
