"""Issue 27: an idle agent costs the API server nothing but its watch. A re-check of a settled node
reads the Node its watch delivered and lists nothing; the Lease is taken only by an attempt that
writes, with one request, and released with one."""

from __future__ import annotations

from dataclasses import replace

from migagent.attempt.listener import Outcome
from migagent.sources.node_label import NodeLabelSource
from migagent_sim.cluster import SimCluster
from tests.integration.agent.support import applied, eventually, node_when, request_counts, state_of

LEASE = ("migagent", "migagent-node-gpu-node-1")


def _lease_holder(cluster: SimCluster) -> str | None:
    spec: dict[str, str] = (cluster.api.lease(*LEASE) or {}).get("spec", {})
    return spec.get("holderIdentity")


def _watched_version(source: NodeLabelSource) -> str | None:
    _, node = source.node_after(-1, 0.0)
    return node.resource_version if node is not None else None


def test_a_re_check_of_a_settled_node_makes_no_request(cluster: SimCluster) -> None:
    agent, source = cluster.build_agent()
    source.start()
    try:
        eventually(lambda: source.watching and source.desired, what="the watch to see the node")
        assert agent.reconcile_once() is Outcome.UNCHANGED  # the first report: written under the Lease
        reported = node_when(cluster, lambda n: state_of(n) == "success", what="the first report")
        version = reported["metadata"]["resourceVersion"]
        eventually(lambda: _watched_version(source) == version, what="the watch to deliver the report")
        since = len(cluster.api.requests)

        for _ in range(3):
            assert agent.reconcile_once() is Outcome.UNCHANGED

        assert request_counts(cluster, since) == {}, "a re-check read or wrote something"
        assert _lease_holder(cluster) is None
    finally:
        source.stop()


NO_RENEWAL_IN_THE_TEST = 3600
"""The Lease's duration for a test that counts its requests: the holder renews it every third of that, and
at 15 s a change that a loaded machine stretched past 5 s renewed it once more (three updates, not two)."""


def test_a_change_takes_the_lease_with_one_request_and_releases_it_with_one(cluster: SimCluster) -> None:
    running = cluster.start_agent(replace(cluster.options(), lease_duration_s=NO_RENEWAL_IN_THE_TEST))
    try:
        node_when(cluster, lambda n: state_of(n) == "success", what="the starting layout reported")
        eventually(lambda: _lease_holder(cluster) is None, what="the first report's Lease released")
        since = len(cluster.api.requests)
        cluster.label("all-balanced")
        node_when(cluster, lambda n: applied(n, "all-balanced"), what="all-balanced applied")
        eventually(lambda: _lease_holder(cluster) is None, what="the change's Lease released")
    finally:
        running.stop()
    lease = {what: n for what, n in request_counts(cluster, since).items() if what.endswith(" leases")}
    # the agent released the record it wrote last: it takes that record back with one update
    assert lease == {"update leases": 2}, lease
