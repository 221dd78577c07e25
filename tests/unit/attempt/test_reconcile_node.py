"""NodeReconcile against the in-memory KubePort and FakeNvml: no HTTP, no threads, a fake clock."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from migagent.attempt.advertise.expected import expected_resources
from migagent.attempt.phases import AgentPhase, Outcome, may_follow
from migagent.errors import TransientError
from migagent.layout.strategy import MigStrategy
from migagent.node.names import ATTEMPT_ANNOTATION, HANDED_OVER_ANNOTATION, LAST_ERROR_ANNOTATION, MIG_CONFIG_LABEL
from migagent.node.port import NodeChangedError
from migagent.reconcile.machine import ApplyEngine
from migagent_sim.doubles.intercept import InterceptingDriver
from migagent_sim.doubles.memory_node import ALL_1G, ALL_7G, BALANCED, MemoryNode


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


def _typo_after(node: MemoryNode, mutation: str, count: int, label: str = "all-balancd") -> list[str]:
    """The admin writes `label` right after the engine's `count`th `mutation` (1 = the first)."""
    seen: list[str] = []

    def admin_typos(name: str) -> None:
        if name == mutation:
            seen.append(name)
            if len(seen) == count:
                node.set_label(label)

    node.engine = ApplyEngine(InterceptingDriver(node.driver, after=admin_typos), node.journal, clock=node.clock)
    return seen


@pytest.mark.parametrize(
    ("mutation", "count"),
    [("destroy_compute_instance", 1), ("destroy_gpu_instance", 2), ("create_gpu_instance", 1),
     ("create_compute_instance", 3)],
)
def test_a_typo_label_mid_change_finishes_the_change_in_flight_before_reporting_invalid_layout(
    node: MemoryNode, mutation: str, count: int
) -> None:
    seen = _typo_after(node, mutation, count)
    node.set_label("all-balanced")

    report = node.reconcile()

    assert len(seen) >= count, "the typo came mid-change"
    assert report.outcome is Outcome.FAILED
    status, reason, message = node.condition()
    assert (status, reason) == ("False", "InvalidLayout")
    assert message.startswith("plan: the label asks for all-balancd: ")
    assert "the change in flight to all-balanced was finished first, so the node holds all-balanced." in message
    assert node.state == "failed"
    # The GPUs hold the last valid layout, advertised; not a mix of all-1g.10gb and all-balanced.
    assert expected_resources(node.driver.observe(), strategy=MigStrategy.MIXED) == BALANCED
    assert node.kube.allocatable == BALANCED
    assert node.released()
    assert node.kube.cordon_episodes == 1


@pytest.mark.parametrize("file_now", ["version: v1\nmig-configs: {all-7g: [", "renamed"])
def test_a_typo_label_with_a_new_layout_file_mid_change_still_finishes_the_layout_in_flight(
    node: MemoryNode, file_now: str
) -> None:
    """The admin ships a new layouts file (broken, or without the layout in flight) and a label naming
    none of it: the change in flight is finished from the layout as resolved when it began."""
    before = node.layout_file.read_text(encoding="utf-8")
    replacement = before.replace("all-balanced:", "balanced-v2:") if file_now == "renamed" else file_now

    def admin(name: str) -> None:
        if name == "destroy_gpu_instance" and node.label == "all-balanced":
            node.layout_file.write_text(replacement, encoding="utf-8")
            node.set_label("balanced-v3")

    node.engine = ApplyEngine(InterceptingDriver(node.driver, after=admin), node.journal, clock=node.clock)
    node.set_label("all-balanced")

    report = node.reconcile()

    assert report.outcome is Outcome.FAILED
    status, reason, message = node.condition()
    assert (status, reason) == ("False", "InvalidLayout")
    assert "the change in flight to all-balanced was finished first, so the node holds all-balanced." in message
    assert expected_resources(node.driver.observe(), strategy=MigStrategy.MIXED) == BALANCED
    assert node.kube.allocatable == BALANCED
    assert node.released()
    assert node.kube.cordon_episodes == 1


def test_a_typo_label_before_any_gpu_changed_is_refused_at_once_leaving_the_starting_layout(
    node: MemoryNode,
) -> None:
    node.gpu_pod("held", gpu=0, slot=4)
    node.blocking_pdb({"app": "held"})  # the drain waits, a safe point each turn

    def admin_typos_while_draining(phase: AgentPhase) -> None:
        if phase is AgentPhase.DRAIN:
            node.set_label("all-balancd")

    node.set_label("all-balanced")
    node.fake.sim_mutations = []
    report = node.reconcile(on_phase=admin_typos_while_draining)

    assert report.outcome is Outcome.FAILED
    assert node.condition()[1] == "InvalidLayout"
    assert node.fake.sim_mutations == []
    assert node.kube.allocatable == ALL_1G
    assert expected_resources(node.driver.observe(), strategy=MigStrategy.MIXED) == ALL_1G
    assert node.released()


def test_a_typo_fixed_while_the_change_in_flight_finishes_is_applied_in_the_same_cordon(node: MemoryNode) -> None:
    def admin(name: str) -> None:
        if name == "destroy_gpu_instance" and node.label == "all-balanced":
            node.set_label("all-balancd")  # the typo, mid-change
        elif name == "create_gpu_instance" and node.label == "all-balancd":
            node.set_label("all-7g")  # fixed (to another layout) while the first change finishes

    node.engine = ApplyEngine(InterceptingDriver(node.driver, after=admin), node.journal, clock=node.clock)
    node.set_label("all-balanced")

    report = node.reconcile()

    assert report.outcome is Outcome.APPLIED
    assert node.state == "success"
    assert node.kube.allocatable == ALL_7G
    assert node.released()
    assert node.kube.cordon_episodes == 1


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
