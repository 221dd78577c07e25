"""Requests that do not grow with pods: the drain follows one list of the node's pods per poll, the wait
for the new advertisement follows the Node watch the agent holds; a change that moves no pod stays
within 30 requests (figures per pod count: bench/agent_bench.py, table (e))."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace

from migagent.attempt.listener import Outcome
from migagent_sim.cluster import SimCluster
from tests.integration.agent.support import SMALL_BALANCED, advertised, eventually, request_counts


def _change(cluster: SimCluster, pods: int) -> Counter[str]:
    # all-1g -> all-balanced destroys the 1g GIs at slots 2-6 of both GPUs: pods there move.
    for i in range(pods):
        cluster.kubelet.run_workload("ml", f"w{i}", mig_uuid=cluster.mig_uuid(i % 2, 2 + i % 5))
    # A Lease of an hour: its renewals (one per third of the duration) are paid by the clock, not by the
    # change, and a loaded machine stretching the change past 5 s would add one to the count.
    agent, source = cluster.build_agent(replace(cluster.options(), lease_duration_s=3600))
    source.start()
    try:
        eventually(lambda: source.desired, what="the watch saw the node")
        cluster.label("all-balanced")
        eventually(lambda: source.desired == "all-balanced" or None, what="the watch saw the label")
        time.sleep(0.1)
        since = len(cluster.api.requests)
        assert agent.reconcile_once() is Outcome.APPLIED
        return request_counts(cluster, since)
    finally:
        source.stop()


def test_a_change_that_moves_no_pod_costs_at_most_30_requests_and_polls_nothing_per_pod(cluster: SimCluster) -> None:
    counts = _change(cluster, 0)
    # The node's Lease is held only while an attempt writes (an idle agent costs none): taken with one
    # create (or one update of the record this agent released last) and released with one update.
    lease = {what: n for what, n in counts.items() if what.endswith(" leases")}
    assert sum(lease.values()) == 2, lease
    assert sum(counts.values()) - 2 <= 30, counts
    assert advertised(cluster) == SMALL_BALANCED


def test_the_polls_of_a_drain_do_not_grow_with_the_pods_it_moves(cluster: SimCluster) -> None:
    counts = _change(cluster, 10)
    assert counts["create pods/eviction"] >= 5  # the planner keeps the GIs it can; the rest of the pods move
    # one list to decide, one to scope the drain, the operator's pods, then one per poll: never one per pod
    assert counts["list pods"] <= 12, counts
    assert counts["get nodes"] <= 12, counts
