"""NodeReconcile against the in-memory KubePort and FakeNvml: no HTTP, no threads, a fake clock."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from migagent.attempt.phases import AgentPhase, Outcome, may_follow
from migagent.errors import TransientError
from migagent.layout.strategy import MigStrategy
from migagent.node.expected import expected_resources
from migagent.node.names import ATTEMPT_ANNOTATION, HANDED_OVER_ANNOTATION, LAST_ERROR_ANNOTATION, MIG_CONFIG_LABEL
from migagent.node.port import NodeChangedError
from migagent.reconcile.machine import ApplyEngine
from migagent_sim.doubles.intercept import InterceptingDriver
from migagent_sim.doubles.memory_node import ALL_7G, BALANCED, MemoryNode


@pytest.fixture
def node(tmp_path: Path) -> MemoryNode:
    return MemoryNode(tmp_path)


def test_a_node_already_holding_its_layout_is_reported_once_and_never_disturbed(node: MemoryNode) -> None:
    assert node.reconcile().outcome is Outcome.UNCHANGED
    assert node.state == "success"
    writes = len(node.kube.writes)
    assert node.reconcile().outcome is Outcome.UNCHANGED
    assert len(node.kube.writes) == writes, "an idle re-check wrote to the Node"
    assert node.kube.cordon_episodes == 0


def test_a_new_label_is_applied_in_one_cordon_episode_and_the_node_released(node: MemoryNode) -> None:
    node.set_label("all-balanced")
    phases: list[AgentPhase] = []

    assert node.reconcile(on_phase=phases.append).outcome is Outcome.APPLIED

    assert node.state == "success"
    assert node.condition()[:2] == ("True", "Applied")
    assert node.kube.allocatable == BALANCED
    assert node.kube.cordon_episodes == 1
    assert node.released()
    assert ATTEMPT_ANNOTATION not in node.kube.annotations
    assert all(may_follow(a, b) for a, b in zip([None, *phases], phases, strict=False)), phases


def test_a_label_changed_mid_apply_re_plans_to_the_new_layout_keeping_the_one_cordon(node: MemoryNode) -> None:
    node.set_label("all-balanced")
    phases: list[AgentPhase] = []

    def admin_changes_their_mind(phase: AgentPhase) -> None:
        phases.append(phase)
        if phase is AgentPhase.APPLY and phases.count(AgentPhase.APPLY) == 1:
            node.set_label("all-7g")

    assert node.reconcile(on_phase=admin_changes_their_mind).outcome is Outcome.APPLIED

    assert node.kube.allocatable == ALL_7G
    assert (node.kube.labels[MIG_CONFIG_LABEL], node.state) == ("all-7g", "success")
    assert node.kube.cordon_episodes == 1
    assert node.released()
    assert phases.count(AgentPhase.OBSERVE) == 2, "observed again after the supersede"
    assert all(may_follow(a, b) for a, b in zip([None, *phases], phases, strict=False)), phases


def test_a_stop_mid_change_hands_the_node_over_and_the_successor_keeps_the_one_cordon(node: MemoryNode) -> None:
    node.gpu_pod("moves", gpu=0, slot=6)
    node.set_label("all-balanced")
    stop = threading.Event()

    def sigterm_while_pausing(phase: AgentPhase) -> None:
        if phase is AgentPhase.PAUSE:
            stop.set()

    assert node.reconcile(stop=stop, on_phase=sigterm_while_pausing).outcome is Outcome.STOPPED

    assert node.kube.unschedulable, "the cordon stays for the successor"
    assert node.kube.labels["nvidia.com/gpu.deploy.device-plugin"] == "paused-for-mig-change"
    assert json.loads(node.kube.annotations[HANDED_OVER_ANNOTATION])["layout"] == "all-balanced"
    assert node.state == "pending"

    assert node.reconcile().outcome is Outcome.APPLIED  # the successor, a new agent process
    assert node.kube.cordon_episodes == 1, "one cordon episode across the handover"
    assert node.released()
    assert node.kube.allocatable == BALANCED
    assert HANDED_OVER_ANNOTATION not in node.kube.annotations


def test_a_stop_after_the_label_was_removed_abandons_the_change_and_releases_the_node(node: MemoryNode) -> None:
    node.set_label("all-balanced")
    stop = threading.Event()

    def label_removed_then_sigterm(phase: AgentPhase) -> None:
        if phase is AgentPhase.PAUSE:
            node.set_label(None)
            stop.set()

    assert node.reconcile(stop=stop, on_phase=label_removed_then_sigterm).outcome is Outcome.STOPPED
    assert node.released()
    assert HANDED_OVER_ANNOTATION not in node.kube.annotations

    assert node.reconcile().outcome is Outcome.NO_DESIRED_LAYOUT
    assert node.state is None, "no stale pending once no layout is asked for"
    assert node.condition()[:2] == ("True", "NoDesiredLayout")


def test_a_typo_label_between_a_gi_and_its_cis_leaves_every_gpu_consistent_before_the_undo(
    node: MemoryNode,
) -> None:
    typed: list[str] = []

    def admin_typos_after_the_first_new_gi(mutation: str) -> None:
        if mutation == "create_gpu_instance" and not typed:
            typed.append(mutation)
            node.set_label("all-balancd")

    node.engine = ApplyEngine(
        InterceptingDriver(node.driver, after=admin_typos_after_the_first_new_gi), node.journal, clock=node.clock
    )
    node.set_label("all-balanced")

    report = node.reconcile()

    assert typed, "the typo came between a create-GI step and its create-CI step"
    assert report.outcome is Outcome.FAILED
    assert node.condition()[1] == "InvalidLayout"
    bare = [
        (gpu.index, gi.placement.start)
        for gpu in node.driver.observe().gpus
        for gi in gpu.gpu_instances
        if not gi.compute_instances
    ]
    assert bare == [], "a GPU instance was left without compute instances"
    assert node.released()
    advertised = expected_resources(node.driver.observe(), strategy=MigStrategy.MIXED)
    assert node.kube.allocatable == advertised, "the plugin re-enumerated what the GPUs hold"


def test_a_success_write_refused_as_stale_is_read_again_and_written(node: MemoryNode) -> None:
    node.set_label("all-balanced")

    def node_moves_on_during_readvertise(phase: AgentPhase) -> None:
        if phase is AgentPhase.READVERTISE:
            node.kube.fail("patch_metadata", NodeChangedError("HTTP 409"), times=2)

    assert node.reconcile(on_phase=node_moves_on_during_readvertise).outcome is Outcome.APPLIED
    assert node.state == "success"
    assert node.released()


def test_a_success_write_refused_every_time_fails_the_attempt_and_undoes_it(node: MemoryNode) -> None:
    node.set_label("all-balanced")

    def node_never_settles(phase: AgentPhase) -> None:
        if phase is AgentPhase.READVERTISE:
            node.kube.fail("patch_metadata", NodeChangedError("HTTP 409"), times=5)

    report = node.reconcile(on_phase=node_never_settles)

    assert report.outcome is Outcome.FAILED
    assert "kept changing" in (report.error or "")
    assert node.state == "failed"
    assert node.released()


def test_an_undo_that_fails_is_reported_and_finished_by_the_next_attempt(node: MemoryNode) -> None:
    node.gpu_pod("guarded", gpu=0, slot=6, labels={"app": "guarded"})
    node.blocking_pdb({"app": "guarded"})
    node.set_label("all-balanced")

    def uncordon_refused_once_draining(phase: AgentPhase) -> None:
        if phase is AgentPhase.DRAIN:
            node.kube.fail("set_unschedulable", TransientError("HTTP 503"), times=1)

    report = node.reconcile(on_phase=uncordon_refused_once_draining, drain_timeout_s=3.0)

    assert report.outcome is Outcome.FAILED
    assert "undo incomplete, retried next attempt: uncordon: HTTP 503" in (report.error or "")
    assert node.kube.unschedulable, "the cordon the undo could not lift is still there"
    assert node.condition()[1] == "DrainBlocked"
    assert "guard" in node.kube.annotations[LAST_ERROR_ANNOTATION]

    node.set_label("all-1g.10gb")  # the admin gives up on the change: the next attempt ends the window
    assert node.reconcile().outcome is Outcome.UNCHANGED
    assert node.released()
    assert node.kube.cordon_episodes == 1
