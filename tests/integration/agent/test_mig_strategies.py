"""The agent under each device-plugin MIG strategy: what it expects in Node allocatable, and what it refuses.

The GPU Operator's default `mig.strategy` is `single`; an agent that expected `nvidia.com/mig-*`
there would cordon an already-correct node and restart its plugin forever (issue 8)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from migagent.attempt.listener import Outcome
from migagent.layout.strategy import MigStrategy
from migagent.node.names import deploy_label
from migagent_sim.cluster import SimCluster, SimClusterConfig
from tests.integration.agent.support import (
    SMALL,
    JsonDict,
    assert_released,
    condition,
    paused_labels,
    request_counts,
    state,
)

# What two H100s in all-1g.10gb advertise under each strategy.
ALL_1G_ADVERTISED = {
    MigStrategy.MIXED: {"nvidia.com/mig-1g.10gb": 14},
    MigStrategy.SINGLE: {"nvidia.com/gpu": 14},
    MigStrategy.NONE: {"nvidia.com/gpu": 2},
}


def _nonzero(cluster: SimCluster) -> dict[str, int]:
    return {name: count for name, count in cluster.kubelet.plugin_resources().items() if count}


@pytest.mark.parametrize("strategy", list(MigStrategy))
def test_a_node_already_in_layout_gets_no_cordon_and_no_plugin_restart_under_each_strategy(
    strategy: MigStrategy, make_cluster: Callable[[SimClusterConfig], SimCluster]
) -> None:
    cluster = make_cluster(replace(SMALL, mig_strategy=strategy))
    if strategy is not MigStrategy.NONE:  # under none the plugin offers no MIG device to hold
        cluster.kubelet.run_workload("ml", "busy", mig_uuid=cluster.mig_uuid(0, 0))
    plugin_uid = (cluster.kubelet.plugin_pod or {})["metadata"]["uid"]
    node_writes: list[JsonDict] = []
    cluster.api.on_node_changed(node_writes.append)
    agent, _ = cluster.build_agent()

    assert agent.reconcile_once() is Outcome.UNCHANGED

    assert _nonzero(cluster) == ALL_1G_ADVERTISED[strategy]
    assert not any(node["spec"].get("unschedulable") for node in node_writes), "the node was cordoned"
    assert all(node["metadata"]["labels"].get(deploy_label("device-plugin")) == "true" for node in node_writes), (
        "the device plugin was paused"
    )
    assert (cluster.kubelet.plugin_pod or {})["metadata"]["uid"] == plugin_uid
    counts = request_counts(cluster)
    assert counts["create pods/eviction"] == 0
    assert counts["delete pods"] == 0
    assert state(cluster) == "success"


def test_an_agent_expecting_mixed_resources_on_a_single_strategy_node_reports_strategy_mismatch_untouched(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    # Issue 14: before, the agent paused and restarted the plugin of an already-correct node on every try.
    cluster = make_cluster(replace(SMALL, mig_strategy=MigStrategy.SINGLE))
    paused: list[str | None] = []
    plugin_label = deploy_label("device-plugin")
    cluster.api.on_node_changed(lambda node: paused.append(node["metadata"]["labels"].get(plugin_label)))
    agent, _ = cluster.build_agent(
        cluster.options(mig_strategy=MigStrategy.MIXED, plugin_settle_s=0.1, readvertise_timeout_s=0.3)
    )

    assert agent.reconcile_once() is Outcome.FAILED

    assert "paused-for-mig-change" not in paused
    assert not cluster.node()["spec"].get("unschedulable")
    assert condition(cluster)["reason"] == "StrategyMismatch"
    assert "mig.strategy single" in condition(cluster)["message"]


def test_auto_takes_the_strategy_the_plugin_advertises_and_changes_nothing_on_a_correct_node(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    cluster = make_cluster(replace(SMALL, mig_strategy=MigStrategy.SINGLE))
    agent, _ = cluster.build_agent(cluster.options(mig_strategy=MigStrategy.MIXED, mig_strategy_auto=True))

    assert agent.reconcile_once() is Outcome.UNCHANGED
    assert state(cluster) == "success"


def test_auto_takes_the_strategy_from_the_cluster_policy_and_refuses_when_the_plugin_contradicts_it(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    cluster = make_cluster(replace(SMALL, mig_strategy=MigStrategy.SINGLE))
    cluster.api.add_cluster_policy("cluster-policy", {"mig": {"strategy": "mixed"}})
    options = replace(cluster.options(mig_strategy_auto=True), cluster_policy="cluster-policy")
    agent, _ = cluster.build_agent(options)

    assert agent.reconcile_once() is Outcome.FAILED
    assert condition(cluster)["reason"] == "StrategyMismatch"
    assert "ClusterPolicy says mig.strategy mixed" in condition(cluster)["message"]
    assert not cluster.node()["spec"].get("unschedulable")


def test_single_refuses_a_layout_that_mixes_profiles_before_anything_on_the_node_changes(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    cluster = make_cluster(replace(SMALL, mig_strategy=MigStrategy.SINGLE))
    cluster.kubelet.run_workload("ml", "busy", mig_uuid=cluster.mig_uuid(1, 3))
    before = cluster.driver().observe()
    agent, _ = cluster.build_agent()
    cluster.label("all-balanced")

    assert agent.reconcile_once() is Outcome.FAILED

    assert state(cluster) == "failed"
    found = condition(cluster)
    assert found["reason"] == "InvalidLayout"
    assert "single strategy" in found["message"]
    assert "more than one MIG device type" in found["message"]
    assert "on GPU 0, GPU 1" in found["message"]
    assert cluster.driver().observe() == before
    assert_released(cluster)
    assert request_counts(cluster)["create pods/eviction"] == 0
    assert paused_labels(cluster) == []
    assert [w.name for w in cluster.kubelet.workloads()] == ["busy"]


@pytest.mark.parametrize(
    ("strategy", "layout", "expected"),
    [
        (MigStrategy.SINGLE, "all-7g", {"nvidia.com/gpu": 2}),
        (MigStrategy.NONE, "all-balanced", {"nvidia.com/gpu": 2}),
        (MigStrategy.MIXED, "all-7g", {"nvidia.com/mig-7g.80gb": 2}),
    ],
)
def test_a_change_ends_in_success_once_allocatable_shows_the_strategys_resources(
    strategy: MigStrategy, layout: str, expected: dict[str, int], make_cluster: Callable[[SimClusterConfig], SimCluster]
) -> None:
    cluster = make_cluster(replace(SMALL, mig_strategy=strategy))
    agent, _ = cluster.build_agent()
    cluster.label(layout)

    assert agent.reconcile_once() is Outcome.APPLIED

    assert _nonzero(cluster) == expected
    assert state(cluster) == "success"
    assert_released(cluster)
