"""A label change, end to end: the real agent, kubernetes client and gRPC client against the simulator."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

from migagent.attempt.phases import AgentPhase, Outcome
from migagent.clock import FakeClock
from migagent.node.names import (
    OBSERVED_ANNOTATION,
    PLAN_ANNOTATION,
    deploy_label,
)
from migagent.plumbing.health import HealthState
from migagent_sim.cluster import AnySimulation, SimCluster, SimClusterConfig
from tests.integration.agent.support import (
    SMALL_ALL_1G,
    SMALL_BALANCED,
    JsonDict,
    advertised,
    applied,
    assert_released,
    attached_pids,
    condition,
    eventually,
    node_annotations,
    node_when,
    paused_labels,
    request_counts,
    state,
    workload_names,
)

EIGHT_GPUS = SimClusterConfig(spec="8xH100-80GB-SXM", start_layout="all-1g.10gb")


def test_a_label_change_ends_in_success_with_exactly_the_new_resources_advertised(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    cluster = make_cluster(EIGHT_GPUS)
    running = cluster.start_agent()
    eventually(lambda: state(cluster) == "success", what="the starting layout reported")
    cluster.label("half-balanced")
    node_when(cluster, lambda n: applied(n, "half-balanced"), what="half-balanced applied")
    running.stop()
    # GPUs 0-3: 2x 1g.10gb + 2g.20gb + 3g.40gb each; GPUs 4-7 keep 7x 1g.10gb.
    assert advertised(cluster) == {
        "nvidia.com/mig-1g.10gb": 36,
        "nvidia.com/mig-2g.20gb": 4,
        "nvidia.com/mig-3g.40gb": 4,
    }
    assert (condition(cluster)["status"], condition(cluster)["reason"]) == ("True", "Applied")
    assert_released(cluster)
    assert cluster.node()["metadata"]["labels"][deploy_label("device-plugin")] == "true"
    observed = json.loads(node_annotations(cluster)[OBSERVED_ANNOTATION])
    assert [len(gpu["gpu_instances"]) for gpu in observed] == [4, 4, 4, 4, 7, 7, 7, 7]
    assert json.loads(node_annotations(cluster)[PLAN_ANNOTATION])["destroyed"] == 20


def test_only_pods_on_destroyed_gpu_instances_are_evicted_and_the_others_keep_running(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    cluster = make_cluster(EIGHT_GPUS)
    # all-1g.10gb -> half-balanced keeps the 1g.10gb GIs at slots 0 and 1 of GPU 0 (the planner keeps
    # as many as fit the new layout) and leaves GPUs 4-7 alone.
    stays = {"kept-gpu0": (0, 0), "gpu5-a": (5, 2), "gpu7": (7, 6)}
    moves = {"moved-gpu0": (0, 4), "moved-gpu3": (3, 6)}
    for name, (gpu, slot) in {**stays, **moves}.items():
        cluster.kubelet.run_workload("ml", name, mig_uuid=cluster.mig_uuid(gpu, slot))
    staying_pids = {w.pid for w in cluster.kubelet.workloads() if w.name in stays}
    agent, _ = cluster.build_agent()
    cluster.label("half-balanced")

    assert agent.reconcile_once() is Outcome.APPLIED

    assert workload_names(cluster) == set(stays)
    assert {p["metadata"]["name"] for p in cluster.api.pods(cluster.config.node_name)} >= set(stays)
    assert staying_pids <= attached_pids(cluster)
    evicted = sorted(r.name or "" for r in cluster.api.requests if r.subresource == "eviction")
    assert evicted == sorted(moves)
    reasons = [e.get("message", "") for e in cluster.api.events() if e.get("reason") == "MigPodEvicted"]
    assert len(reasons) == 2
    assert all("destroys this GPU instance" in reason for reason in reasons)


def test_a_node_that_already_matches_is_neither_drained_nor_has_its_device_plugin_restarted(
    cluster: SimCluster,
) -> None:
    cluster.kubelet.run_workload("ml", "busy", mig_uuid=cluster.mig_uuid(0, 0))
    plugin_uid = (cluster.kubelet.plugin_pod or {})["metadata"]["uid"]
    deploy_values: list[str | None] = []
    plugin_label = deploy_label("device-plugin")
    cluster.api.on_node_changed(lambda node: deploy_values.append(node["metadata"]["labels"].get(plugin_label)))
    agent, _ = cluster.build_agent()

    assert agent.reconcile_once() is Outcome.UNCHANGED
    first = request_counts(cluster)
    assert agent.reconcile_once() is Outcome.UNCHANGED

    assert first["create pods/eviction"] == 0
    assert first["delete pods"] == 0
    assert first["patch nodes"] == 1  # the state label, once
    assert set(deploy_values) <= {"true"}
    assert (cluster.kubelet.plugin_pod or {})["metadata"]["uid"] == plugin_uid
    assert not cluster.node()["spec"].get("unschedulable")
    idle = request_counts(cluster, since=sum(first.values()))
    # Reads only: its Node, and the sole-owner check (mig-manager pods, DRA ResourceSlices; issue 14).
    assert set(idle) <= {"get nodes", "list pods", "list resourceslices"}, f"an idle re-check only reads, got {idle}"
    assert state(cluster) == "success"


def test_a_matching_node_whose_device_plugin_is_still_registering_is_neither_cordoned_nor_restarted(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    # The plugin pod was just (re)started (node boot, DaemonSet rollout): it registers after a lag.
    cluster = make_cluster(SimClusterConfig(spec="2xH100-80GB-SXM", plugin_lag_s=0.5))
    plugin_uid = (cluster.kubelet.plugin_pod or {})["metadata"]["uid"]
    node_writes: list[JsonDict] = []
    cluster.api.on_node_changed(node_writes.append)
    agent, _ = cluster.build_agent()

    assert agent.reconcile_once() is Outcome.UNCHANGED

    assert not any(node["spec"].get("unschedulable") for node in node_writes), "the node was cordoned"
    assert paused_labels(cluster) == []
    assert all(node["metadata"]["labels"].get(deploy_label("device-plugin")) == "true" for node in node_writes), (
        "the device plugin was paused"
    )
    assert (cluster.kubelet.plugin_pod or {})["metadata"]["uid"] == plugin_uid
    assert request_counts(cluster)["create pods/eviction"] == 0
    assert state(cluster) == "success"
    assert advertised(cluster) == SMALL_ALL_1G


def test_every_phase_of_a_change_is_recorded_as_an_event_on_the_node(cluster: SimCluster) -> None:
    cluster.kubelet.run_workload("ml", "moves", mig_uuid=cluster.mig_uuid(0, 6))
    agent, _ = cluster.build_agent()
    cluster.label("all-balanced")

    assert agent.reconcile_once() is Outcome.APPLIED

    reasons = [e["reason"] for e in cluster.api.events()]
    assert reasons == [
        "MigReconfiguring",
        "MigCordoned",
        "MigDevicePluginPaused",
        "MigDraining",
        "MigPodEvicted",
        "MigGpusReconfigured",
        "MigDevicePluginRestarted",
        "MigWaitingForDevicePlugin",
        "MigConfigApplied",  # success is written (conditionally) before the uncordon: issue 9 item 4
        "MigUncordoned",
    ]
    node_uid = cluster.node()["metadata"]["uid"]
    for event in cluster.api.events():
        assert event["metadata"]["namespace"] == "default"
        assert (event["involvedObject"]["kind"], event["involvedObject"]["uid"]) == ("Node", node_uid)


def test_an_admin_cordoned_node_stays_cordoned_after_the_change(cluster: AnySimulation) -> None:
    cluster.edit_node(lambda node: node["spec"].update(unschedulable=True))
    agent, _ = cluster.build_agent()
    cluster.label("all-balanced")

    assert agent.reconcile_once() is Outcome.APPLIED

    assert cluster.node()["spec"].get("unschedulable") is True
    assert "migagent.io/cordoned-by-migagent" not in node_annotations(cluster)
    assert advertised(cluster) == SMALL_BALANCED


def test_the_delete_pod_strategy_restarts_a_daemonset_plugin_and_reaches_success(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    # Where the standalone overlay's RBAC lets the agent delete the plugin pod.
    plugin_labels = {"app.kubernetes.io/name": "nvidia-device-plugin"}
    config = SimClusterConfig(
        spec="2xH100-80GB-SXM",
        plugin_mode="daemonset",
        labels={},
        plugin_namespace="nvidia-device-plugin",
        plugin_labels=plugin_labels,
    )
    cluster = make_cluster(config)
    old_plugin = (cluster.kubelet.plugin_pod or {})["metadata"]["uid"]
    options = replace(
        cluster.options(),
        restart="delete-pod",
        operator_namespace="nvidia-device-plugin",
        plugin_selector="app.kubernetes.io/name=nvidia-device-plugin",
    )
    agent, _ = cluster.build_agent(options)
    cluster.label("all-balanced")

    assert agent.reconcile_once() is Outcome.APPLIED

    assert advertised(cluster) == SMALL_BALANCED
    assert (cluster.kubelet.plugin_pod or {})["metadata"]["uid"] != old_plugin
    assert_released(cluster)


def test_the_agent_heartbeats_at_every_phase_so_liveness_survives_a_long_reconfiguration(
    cluster: SimCluster,
) -> None:
    health_clock = FakeClock()
    health = HealthState(health_clock, stale_after_s=10.0)

    def slow_phase(_phase: AgentPhase) -> None:
        health_clock.advance(8.0)  # every phase takes 8 s: longer than the limit over the whole change
        assert health.liveness().ok

    agent, _ = cluster.build_agent(health=health, phase_hook=slow_phase)
    cluster.label("all-balanced")

    assert agent.reconcile_once() is Outcome.APPLIED
    assert health_clock.elapsed > 10.0 * 3
