"""The back-off holds: no attempt before its retry time unless something it depends on changed; the retry
time survives a restart (on the Node); every failure kind backs off, status-write failures included."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from migagent.attempt.backoff import RetryHold
from migagent.attempt.phases import Outcome
from migagent.errors import PermanentError
from migagent.node.budgets import PdbView
from migagent.node.names import NEXT_RETRY_ANNOTATION
from migagent.reconcile.retry import RetryPolicy
from migagent_sim.cluster import DEMO_LAYOUTS
from migagent_sim.doubles.memory_node import MemoryNode

POLICY = RetryPolicy(failure_backoff_initial=30.0, failure_backoff_max=1800.0)


@pytest.fixture
def node(tmp_path: Path) -> MemoryNode:
    """A change to all-balanced that the gate refuses: a pod on a GI it destroys, guarded by a budget
    that can never allow an eviction (minAvailable 1 of 1 expected)."""
    node = MemoryNode(tmp_path)
    node.settings = replace(node.settings, retry=POLICY)
    node.gpu_pod("guarded", gpu=0, slot=6, labels={"app": "guarded"})
    node.kube.pdbs.append(PdbView("ml", "strict", match_labels={"app": "guarded"}, min_available=1, expected_pods=1))
    node.set_label("all-balanced")
    return node


def test_a_resync_before_the_retry_time_is_held_and_writes_nothing(node: MemoryNode) -> None:
    agent = node.agent()
    assert agent.reconcile_once() is Outcome.FAILED
    assert agent.retry_in_s == pytest.approx(30.0)
    writes = len(node.kube.writes)

    node.clock.advance(29.0)
    assert agent.reconcile_once() is Outcome.HELD  # a resync tick, a watch reconnect: nothing is done
    assert len(node.kube.writes) == writes
    assert agent.retry_in_s == pytest.approx(1.0), "the hold keeps the retry time, it does not restart it"

    node.clock.advance(1.0)
    assert agent.reconcile_once() is Outcome.FAILED
    assert agent.retry_in_s == pytest.approx(60.0), "the second failure doubles the delay"


def test_the_retry_time_is_kept_on_the_node_and_a_restarted_agent_honours_it(node: MemoryNode) -> None:
    assert node.agent().reconcile_once() is Outcome.FAILED
    hold = RetryHold.from_annotation(node.kube.annotations[NEXT_RETRY_ANNOTATION])
    assert hold is not None
    assert (hold.at, hold.label, hold.failures) == (node.clock.wall() + 30.0, "all-balanced", 1)

    restarted = node.agent()
    node.clock.advance(10.0)
    assert restarted.reconcile_once() is Outcome.HELD
    assert restarted.retry_in_s == pytest.approx(20.0)


def test_a_label_change_is_never_held(node: MemoryNode) -> None:
    agent = node.agent()
    assert agent.reconcile_once() is Outcome.FAILED
    node.set_label("all-1g.10gb")
    assert agent.reconcile_once() is Outcome.UNCHANGED
    assert agent.retry_in_s is None


def test_a_changed_layout_file_lifts_the_hold(node: MemoryNode) -> None:
    agent = node.agent()
    assert agent.reconcile_once() is Outcome.FAILED
    node.layout_file.write_text(DEMO_LAYOUTS + "\n# the ConfigMap was edited\n", encoding="utf-8")
    assert agent.reconcile_once() is Outcome.FAILED, "tried again at once (and refused again)"


def test_a_pod_that_left_the_gpus_lifts_the_hold(node: MemoryNode) -> None:
    agent = node.agent()
    assert agent.reconcile_once() is Outcome.FAILED
    node.kube.pods.clear()  # the guarded workload was moved by its owner
    assert agent.reconcile_once() is Outcome.APPLIED


def test_a_process_that_left_the_gpus_lifts_the_hold(tmp_path: Path) -> None:
    node = MemoryNode(tmp_path)
    gi = next(g for g in node.fake.state.gpus[0].gpu_instances if g.placement.start == 6)
    node.fake.sim_attach_process(gi.compute_instances[0].uuid, pid=4242)
    node.set_label("all-balanced")
    agent = node.agent()
    assert agent.reconcile_once() is Outcome.FAILED
    assert agent.reconcile_once() is Outcome.HELD
    node.fake.sim_detach_process(4242)
    assert agent.reconcile_once() is Outcome.APPLIED


def test_a_node_whose_status_writes_are_refused_still_backs_off_and_further_each_time(node: MemoryNode) -> None:
    forbidden = PermanentError("patch node gpu-node-1: HTTP 403: forbidden")
    for call in ("patch_metadata", "set_condition"):
        node.kube.fail(call, forbidden, times=1000)
    agent = node.agent()
    assert agent.reconcile_once() is Outcome.FAILED
    assert NEXT_RETRY_ANNOTATION not in node.kube.annotations
    assert agent.reconcile_once() is Outcome.HELD, "held from the agent's memory"
    node.clock.advance(30.0)
    assert agent.reconcile_once() is Outcome.FAILED
    assert agent.retry_in_s == pytest.approx(60.0), "counted in memory: the delay still doubles"
    # The Event is the admin's other channel: tried at each failure although no status write lands.
    failed = [e for e in node.kube.events if e.reason == "MigDrainBlocked"]
    assert len(failed) == 2
    assert all(e.warning for e in failed)
    assert "the Node's status could not be written: patch node gpu-node-1: HTTP 403: forbidden" in failed[0].message


def test_when_every_status_write_is_refused_a_mig_config_failed_event_is_still_emitted(tmp_path: Path) -> None:
    node = MemoryNode(tmp_path)
    forbidden = PermanentError("patch node gpu-node-1: HTTP 403: forbidden")
    for call in ("patch_metadata", "set_condition"):
        node.kube.fail(call, forbidden, times=1000)
    node.set_label("all-balanced")
    assert node.agent().reconcile_once() is Outcome.FAILED
    (event,) = node.kube.events
    assert (event.reason, event.warning) == ("MigConfigFailed", True)
    assert "HTTP 403: forbidden" in event.message
    assert node.released()  # nothing was cordoned: the first write was refused


def test_an_unreadable_hold_annotation_holds_nothing() -> None:
    assert RetryHold.from_annotation("not json") is None
    assert RetryHold.from_annotation(json.dumps({"label": "x"})) is None


def test_a_pdb_that_blocks_for_now_forever_gets_one_cordon_per_retry_not_per_resync(tmp_path: Path) -> None:
    node = MemoryNode(tmp_path)
    node.settings = replace(node.settings, retry=POLICY, drain_timeout_s=5.0)
    node.gpu_pod("guarded", gpu=0, slot=6, labels={"app": "guarded"})
    node.blocking_pdb({"app": "guarded"})  # 3 pods expected: the gate lets it through, the drain times out
    node.set_label("all-balanced")
    agent = node.agent()
    outcomes = []
    for _ in range(20):  # a resync tick every 10 s for 200 s
        outcomes.append(agent.reconcile_once())
        node.clock.advance(10.0)
    failed = outcomes.count(Outcome.FAILED)
    assert failed == node.kube.cordon_episodes
    # Retries at about 0, 35, 100 and 225 s (30, 60, 120 s after each failure ends): 3 attempts in 200 s.
    assert failed == 3, outcomes
    assert node.released()
