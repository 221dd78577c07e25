"""The agent killed anywhere: a fresh agent (new process, same node, same journal directory) converges
and leaves nothing cordoned or paused."""

from __future__ import annotations

import threading

import pytest

from migagent.attempt.phases import AgentPhase, Outcome
from migagent.node.names import ATTEMPT_ANNOTATION, HANDED_OVER_ANNOTATION
from migagent_sim.cluster import AnySimulation, SimCluster
from migagent_sim.doubles.intercept import SimulatedCrash, crashing_driver
from tests.integration.agent.support import (
    BLOCKING_FOR_NOW,
    SMALL_ALL_1G,
    SMALL_BALANCED,
    advertised,
    assert_released,
    condition,
    crash_at,
    eventually,
    node_annotations,
    paused_labels,
    state,
    workload_names,
)

KILLABLE = [phase for phase in AgentPhase if phase is not AgentPhase.UNDO]


def _start_change(cluster: AnySimulation) -> None:
    # A pod on a GI that all-balanced destroys, and one on a GI it keeps.
    cluster.kubelet.run_workload("ml", "moves", mig_uuid=cluster.mig_uuid(0, 6))
    cluster.kubelet.run_workload("ml", "stays", mig_uuid=cluster.mig_uuid(1, 0))
    cluster.label("all-balanced")


def _assert_converged(cluster: AnySimulation) -> None:
    assert state(cluster) == "success"
    assert (condition(cluster)["status"], condition(cluster)["reason"]) == ("True", "Applied")
    assert advertised(cluster) == SMALL_BALANCED
    assert ATTEMPT_ANNOTATION not in node_annotations(cluster)
    assert workload_names(cluster) == {"stays"}
    assert_released(cluster)


@pytest.mark.parametrize("phase", KILLABLE, ids=[p.value for p in KILLABLE])
def test_an_agent_killed_as_a_phase_starts_is_finished_by_a_restarted_agent(
    cluster: SimCluster, phase: AgentPhase
) -> None:
    _start_change(cluster)
    doomed, _ = cluster.build_agent(phase_hook=crash_at(phase))
    with pytest.raises(SimulatedCrash):
        doomed.reconcile_once()

    restarted, _ = cluster.build_agent()
    assert restarted.reconcile_once() in (Outcome.APPLIED, Outcome.UNCHANGED)

    _assert_converged(cluster)


@pytest.mark.parametrize("crash_at_call", [1, 9])
def test_an_agent_killed_in_the_middle_of_the_apply_is_finished_by_a_restarted_agent(
    cluster: AnySimulation, crash_at_call: int
) -> None:
    _start_change(cluster)
    doomed, _ = cluster.build_agent(
        wrap_driver=lambda driver: crashing_driver(driver, crash_at=crash_at_call, after_call=True)
    )
    with pytest.raises(SimulatedCrash):
        doomed.reconcile_once()
    assert cluster.node()["spec"].get("unschedulable") is True, "the crash left the node mid-change"

    restarted, _ = cluster.build_agent()
    assert restarted.reconcile_once() is Outcome.APPLIED

    _assert_converged(cluster)


def _cordons(cluster: SimCluster) -> list[bool]:
    """Every cordon (False -> True of spec.unschedulable) the Node goes through from now on."""
    episodes: list[bool] = []
    last = [bool(cluster.node()["spec"].get("unschedulable"))]

    def seen(node: dict[str, object]) -> None:
        now = bool(node["spec"].get("unschedulable"))  # type: ignore[attr-defined]
        if now and not last[0]:
            episodes.append(True)
        last[0] = now

    cluster.api.on_node_changed(seen)
    return episodes


def test_a_sigterm_mid_change_hands_the_node_over_and_the_successor_finishes_in_one_cordon_episode(
    cluster: SimCluster,
) -> None:
    episodes = _cordons(cluster)
    _start_change(cluster)
    stop = threading.Event()

    def sigterm_as_the_drain_starts(phase: AgentPhase) -> None:
        if phase is AgentPhase.DRAIN:
            stop.set()

    stopping, _ = cluster.build_agent(phase_hook=sigterm_as_the_drain_starts)
    assert stopping.reconcile_once(stop) is Outcome.STOPPED
    assert cluster.node()["spec"].get("unschedulable") is True, "the cordon stays for the successor"
    assert paused_labels(cluster), "the operands stay paused for the successor"
    assert HANDED_OVER_ANNOTATION in node_annotations(cluster)
    assert state(cluster) == "pending"

    restarted, _ = cluster.build_agent()
    assert restarted.reconcile_once() is Outcome.APPLIED
    _assert_converged(cluster)
    assert len(episodes) == 1, "one cordon episode across the handover"
    assert HANDED_OVER_ANNOTATION not in node_annotations(cluster)


def test_a_sigterm_after_the_label_was_removed_abandons_the_change_and_releases_the_node(
    cluster: SimCluster,
) -> None:
    _start_change(cluster)
    stop = threading.Event()

    def label_removed_then_sigterm(phase: AgentPhase) -> None:
        if phase is AgentPhase.DRAIN:
            cluster.label(None)
            stop.set()

    stopping, _ = cluster.build_agent(phase_hook=label_removed_then_sigterm)
    assert stopping.reconcile_once(stop) is Outcome.STOPPED
    assert_released(cluster)
    assert advertised(cluster) == SMALL_ALL_1G, "the GPUs were not touched"

    restarted, _ = cluster.build_agent()
    assert restarted.reconcile_once() is Outcome.NO_DESIRED_LAYOUT
    assert state(cluster) is None, "no stale pending: the state label is taken down"
    assert condition(cluster)["reason"] == "NoDesiredLayout"


def test_a_stop_request_while_a_pdb_blocks_the_drain_ends_the_wait_and_hands_the_node_over(
    cluster: SimCluster,
) -> None:
    cluster.kubelet.run_workload("ml", "guarded", mig_uuid=cluster.mig_uuid(0, 6), labels={"app": "guarded"})
    cluster.api.add_pdb("ml", "guarded-pdb", match_labels={"app": "guarded"}, disruptions_allowed=0)
    cluster.api.set_pdb_status("ml", "guarded-pdb", BLOCKING_FOR_NOW)  # blocks for now, not for good
    stop = threading.Event()
    evictions_at_stop: list[int] = []

    def evictions() -> int:
        return sum(1 for r in cluster.api.requests if r.subresource == "eviction")

    def stop_once_refused() -> None:
        eventually(
            lambda: any(r.subresource == "eviction" and r.status == 429 for r in cluster.api.requests),
            what="an eviction refused by the PDB",
        )
        evictions_at_stop.append(evictions())
        stop.set()

    threading.Thread(target=stop_once_refused, daemon=True).start()
    agent, _ = cluster.build_agent(cluster.options(drain_timeout_s=30.0))
    cluster.label("all-balanced")

    assert agent.reconcile_once(stop) is Outcome.STOPPED

    assert evictions() - evictions_at_stop[0] <= 1, "the drain kept retrying after the stop request"
    assert cluster.node()["spec"].get("unschedulable") is True, "handed over: the cordon stays"
    assert "guarded" in workload_names(cluster)
    assert [len(g.gpu_instances) for g in cluster.fake.state.gpus] == [7, 7], "the GPUs were not touched"
    assert state(cluster) != "failed"
