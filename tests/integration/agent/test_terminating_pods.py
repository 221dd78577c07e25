"""The GPUs change only after an evicted pod has finished terminating and released its device."""

from __future__ import annotations

import threading
from typing import Any

from migagent.attempt.phases import AgentPhase, Outcome
from migagent.podresources import PodResourcesClient
from migagent_sim.cluster import SimCluster


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


def test_a_second_eviction_under_one_budget_waits_for_the_first_pods_replacement_to_be_ready(
    cluster: SimCluster,
) -> None:
    # Three replicas of app=web, two on 1g.10gb instances the change destroys; minAvailable 2.
    for name, slot in (("web-0", 4), ("web-1", 5)):
        cluster.kubelet.run_workload("ml", name, mig_uuid=cluster.mig_uuid(0, slot), labels={"app": "web"})
    cluster.api.create_pod(
        node_name="gpu-node-2", namespace="ml", name="web-2", labels={"app": "web"}, owner_kind="ReplicaSet"
    )
    cluster.api.add_managed_pdb("ml", "web", match_labels={"app": "web"}, min_available=2)
    scheduler = ReplacementScheduler(cluster)
    agent, _ = cluster.build_agent()
    cluster.label("all-balanced")

    with scheduler:
        assert agent.reconcile_once() is Outcome.APPLIED

    statuses = [r.status for r in cluster.api.requests if r.subresource == "eviction"]
    assert statuses.count(201) == 2
    assert 429 in statuses  # the second eviction found the budget spent until a replacement was Ready
    assert scheduler.started >= 1


class ReplacementScheduler:
    """Binds each Pending replacement the fake kubelet creates to another node and marks it Ready."""

    def __init__(self, cluster: SimCluster) -> None:
        self._cluster = cluster
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.started = 0

    def __enter__(self) -> ReplacementScheduler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            for pod in list(self._cluster.kubelet.replacements)[self.started :]:
                self._cluster.api.update_pod(pod["metadata"]["namespace"], pod["metadata"]["name"], _running_elsewhere)
                self.started += 1


def _running_elsewhere(pod: dict[str, Any]) -> None:
    pod["spec"]["nodeName"] = "gpu-node-2"
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
