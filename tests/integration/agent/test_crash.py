"""The agent killed anywhere: a fresh agent (new process, same node, same journal directory) converges
and leaves nothing cordoned or paused."""

from __future__ import annotations

import threading

import pytest

from migagent.kube.names import ATTEMPT_ANNOTATION
from migagent.runtime.phases import AgentPhase, Outcome
from migagent_sim.cluster import SimCluster
from tests.integration.agent.support import (
    BLOCKING_FOR_NOW,
    SMALL_ALL_1G,
    SMALL_BALANCED,
    SimulatedCrash,
    advertised,
    assert_released,
    condition,
    crash_at,
    eventually,
    node_annotations,
    state,
    workload_names,
)
from tests.integration.apply.support import SimulatedCrash as CrashInsideApply
from tests.integration.apply.support import crashing_driver

KILLABLE = [phase for phase in AgentPhase if phase is not AgentPhase.UNDO]


def _start_change(cluster: SimCluster) -> None:
    # A pod on a GI that all-balanced destroys, and one on a GI it keeps.
    cluster.kubelet.run_workload("ml", "moves", mig_uuid=cluster.mig_uuid(0, 6))
    cluster.kubelet.run_workload("ml", "stays", mig_uuid=cluster.mig_uuid(1, 0))
    cluster.label("all-balanced")


def _assert_converged(cluster: SimCluster) -> None:
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
    cluster: SimCluster, crash_at_call: int
) -> None:
    _start_change(cluster)
    doomed, _ = cluster.build_agent(
        wrap_driver=lambda driver: crashing_driver(driver, crash_at=crash_at_call, after_call=True)
    )
    with pytest.raises(CrashInsideApply):
        doomed.reconcile_once()
    assert cluster.node()["spec"].get("unschedulable") is True, "the crash left the node mid-change"

    restarted, _ = cluster.build_agent()
    assert restarted.reconcile_once() is Outcome.APPLIED

    _assert_converged(cluster)


def test_a_stop_request_between_phases_undoes_the_attempt_and_a_later_agent_completes_it(
    cluster: SimCluster,
) -> None:
    _start_change(cluster)
    stop = threading.Event()

    def stop_during_drain(phase: AgentPhase) -> None:
        if phase is AgentPhase.DRAIN:
            stop.set()

    stopping, _ = cluster.build_agent(phase_hook=stop_during_drain)
    assert stopping.reconcile_once(stop) is Outcome.STOPPED
    assert_released(cluster)
    assert advertised(cluster) == SMALL_ALL_1G, "the GPUs were not touched"

    restarted, _ = cluster.build_agent()
    assert restarted.reconcile_once() is Outcome.APPLIED
    _assert_converged(cluster)


def test_a_stop_request_while_a_pdb_blocks_the_drain_ends_the_wait_and_releases_the_node(
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
    assert_released(cluster)
    assert "guarded" in workload_names(cluster)
    assert advertised(cluster) == SMALL_ALL_1G, "the GPUs were not touched"
    assert state(cluster) != "failed"
