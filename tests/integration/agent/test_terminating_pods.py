"""The GPUs change only after an evicted pod has finished terminating and released its device."""

from __future__ import annotations

from typing import Any

from migagent.cli.simcluster import SimCluster
from migagent.podresources import PodResourcesClient
from migagent.runtime.listener import AgentPhase, Outcome


def test_the_agent_applies_only_after_an_evicted_pod_has_finished_terminating_and_released_its_device(
    cluster: SimCluster,
) -> None:
    # all-1g.10gb -> all-balanced destroys the 1g.10gb GPU instance at slot 4 of GPU 0.
    cluster.kubelet.run_workload("ml", "slow-0", mig_uuid=cluster.mig_uuid(0, 4))
    # A 300 s grace period (3 s at the simulator's scale): the pod stays Terminating that long.
    cluster.api.update_pod("ml", "slow-0", lambda pod: pod["spec"].__setitem__("terminationGracePeriodSeconds", 300))
    seen_at_apply: list[tuple[Any, tuple[str, ...]]] = []

    def at_phase(phase: AgentPhase) -> None:
        if phase is AgentPhase.APPLY:
            held = tuple(p.name for p in PodResourcesClient(cluster.socket_path).list())
            seen_at_apply.append((cluster.api.pod("ml", "slow-0"), held))

    agent, _ = cluster.build_agent(phase_hook=at_phase)
    cluster.label("all-balanced")

    assert agent.reconcile_once() is Outcome.APPLIED
    evictions = [r for r in cluster.api.requests if r.subresource == "eviction"]
    assert [r.status for r in evictions] == [201]
    assert seen_at_apply == [(None, ())]
