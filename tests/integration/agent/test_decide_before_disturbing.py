"""Decide before disturbing: a change that needs pods gone that cannot be evicted is refused with the
pods named, before the first write to the Node: no cordon, no pause, no eviction; retries re-check
without writing more than the failed state."""

from __future__ import annotations

import itertools

from migagent.attempt.listener import Outcome
from migagent.clock import FakeClock
from migagent.node.names import MIG_CONFIG_STATE_LABEL
from migagent_sim.cluster import SimCluster
from tests.integration.agent.support import SMALL_ALL_1G, JsonDict, advertised, condition, workload_names


def _watch_node(cluster: SimCluster) -> list[JsonDict]:
    writes: list[JsonDict] = []
    cluster.api.on_node_changed(writes.append)
    return writes


def _disturbed(writes: list[JsonDict]) -> list[str]:
    """What the agent did to the node besides reporting: cordons and paused operands."""
    found = [f"cordon at rv {n['metadata']['resourceVersion']}" for n in writes if n["spec"].get("unschedulable")]
    found += [k for n in writes for k, v in n["metadata"].get("labels", {}).items() if v == "paused-for-mig-change"]
    return found


def test_a_daemonset_pod_and_a_pod_without_controller_on_destroyed_gis_are_refused_before_any_cordon(
    cluster: SimCluster,
) -> None:
    # all-1g -> all-balanced destroys the 1g GIs at slots 4-6 of GPU 0.
    cluster.kubelet.run_workload("ml", "exporter", mig_uuid=cluster.mig_uuid(0, 6), owner_kind="DaemonSet")
    cluster.kubelet.run_workload("ml", "bare", mig_uuid=cluster.mig_uuid(0, 5), owner_kind=None)
    agent, _ = cluster.build_agent()
    writes = _watch_node(cluster)
    cluster.label("all-balanced")

    assert agent.reconcile_once() is Outcome.FAILED

    assert _disturbed(writes) == []
    assert not [r for r in cluster.api.requests if r.subresource == "eviction"]
    assert cluster.node()["metadata"]["labels"][MIG_CONFIG_STATE_LABEL] == "failed"
    refused = condition(cluster)
    assert refused["reason"] == "DrainBlocked"
    assert "ml/exporter is a DaemonSet pod" in refused["message"]
    assert "ml/bare is without a controller" in refused["message"]
    assert "Nothing was cordoned" in refused["message"]
    assert workload_names(cluster) >= {"exporter", "bare"}
    assert advertised(cluster) == SMALL_ALL_1G


def test_retries_of_a_refusal_back_off_exponentially_and_never_cordon(cluster: SimCluster) -> None:
    cluster.kubelet.run_workload("ml", "exporter", mig_uuid=cluster.mig_uuid(0, 6), owner_kind="DaemonSet")
    clock = FakeClock()  # the retry times are the agent's own: advanced by hand, never slept
    agent, _ = cluster.build_agent(clock=clock)
    writes = _watch_node(cluster)
    cluster.label("all-balanced")

    delays = []
    for _ in range(5):
        assert agent.reconcile_once() is Outcome.FAILED
        assert agent.retry_in_s is not None
        delays.append(agent.retry_in_s)
        assert agent.reconcile_once() is Outcome.HELD, "a resync before the retry time starts nothing"
        clock.advance(agent.retry_in_s)

    assert _disturbed(writes) == []
    # Fast options: RetryPolicy(failure_backoff_initial=0.2, failure_backoff_max=2.0): 0.2, 0.4, 0.8, 1.6, 2.0 cap.
    assert all(later > 1.5 * earlier for earlier, later in itertools.pairwise(delays[:4]))
    assert 1.5 < delays[-1] <= 2.0


def test_a_pod_that_moves_away_lets_the_retry_apply_the_change(cluster: SimCluster) -> None:
    cluster.kubelet.run_workload("ml", "bare", mig_uuid=cluster.mig_uuid(0, 5), owner_kind=None)
    agent, _ = cluster.build_agent()
    cluster.label("all-balanced")
    assert agent.reconcile_once() is Outcome.FAILED

    cluster.api.delete_pod("ml", "bare")  # the owner moved it away
    assert agent.reconcile_once() is Outcome.APPLIED
    assert cluster.node()["metadata"]["labels"][MIG_CONFIG_STATE_LABEL] == "success"
