"""Nodes served by NVIDIA's DRA driver with static MIG devices (issue 17 item 4): after a change the agent
restarts the driver's kubelet plugin as it does the device plugin, and reports success only once the
node's ResourceSlices (resource.k8s.io/v1, driver gpu.nvidia.com) list the new MIG devices.

The fake kubelet plugin (migagent_sim.dra_plugin) publishes its slice only when it starts, as the real
one does; the fake API server serves resourceslices list/watch with field selectors, and enforces the
RBAC of deploy/components/dra-driver."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from migagent.node.names import DESIRED_ANNOTATION, MIG_CONFIG_STATE_LABEL
from migagent_sim.cluster import SimCluster, SimClusterConfig
from tests.integration.agent.support import SMALL, JsonDict, eventually, state

MakeCluster = Callable[..., SimCluster]
DRA = replace(SMALL, dra_driver=True)


def _fake_mig_uuids(cluster: SimCluster) -> set[str]:
    return {ci.uuid for gpu in cluster.fake.state.gpus for gi in gpu.gpu_instances for ci in gi.compute_instances}


def _sliced_mig_uuids(cluster: SimCluster) -> set[str]:
    return {
        device["attributes"]["uuid"]["string"]
        for item in cluster.api.resource_slices()
        if item["spec"]["nodeName"] == cluster.config.node_name and item["spec"]["driver"] == "gpu.nvidia.com"
        for device in item["spec"]["devices"]
        if device["attributes"]["type"]["string"] == "mig"
    }


def _dra_pod_uid(cluster: SimCluster) -> str:
    assert cluster.kubelet.dra is not None
    return str((cluster.kubelet.dra.pod or {})["metadata"]["uid"])


def _applied(cluster: SimCluster, layout: str) -> bool:
    annotations = cluster.node()["metadata"].get("annotations", {})
    return state(cluster) == "success" and layout in annotations.get(DESIRED_ANNOTATION, "")


def _start(make_cluster: MakeCluster, config: SimClusterConfig = DRA, **settings: object) -> SimCluster:
    cluster = make_cluster(config, "components/dra-driver")
    options = cluster.options(**settings)
    if config.plugin_mode == "absent":
        options = replace(options, restart="none")
    cluster.start_agent(options)
    eventually(lambda: state(cluster) == "success", what="the starting layout reported")
    return cluster


def _slices_when_success(cluster: SimCluster, layout: str) -> list[set[str]]:
    """The MIG UUIDs the slices listed at each moment the node was reported `success` for `layout`."""
    seen: list[set[str]] = []

    def on_node(node: JsonDict) -> None:
        metadata = node["metadata"]
        desired = metadata.get("annotations", {}).get(DESIRED_ANNOTATION, "")
        if metadata.get("labels", {}).get(MIG_CONFIG_STATE_LABEL) == "success" and layout in desired:
            seen.append(_sliced_mig_uuids(cluster))

    cluster.api.on_node_changed(on_node)
    return seen


def test_a_change_restarts_the_dra_kubelet_plugin_and_success_waits_for_its_slices_to_show_the_new_devices(
    make_cluster: MakeCluster,
) -> None:
    cluster = _start(make_cluster, replace(DRA, plugin_lag_s=0.4))
    assert _sliced_mig_uuids(cluster) == _fake_mig_uuids(cluster)
    before_uid, before = _dra_pod_uid(cluster), _fake_mig_uuids(cluster)
    at_success = _slices_when_success(cluster, "all-balanced")

    cluster.label("all-balanced")

    eventually(lambda: _applied(cluster, "all-balanced"), what="all-balanced applied")
    after = _fake_mig_uuids(cluster)
    assert after != before
    assert _dra_pod_uid(cluster) != before_uid, "the DRA kubelet plugin was not restarted"
    assert _sliced_mig_uuids(cluster) == after
    eventually(lambda: at_success, what="the success write to reach the listener")
    assert at_success[0] == after, "success was reported before the slices showed the new devices"


def test_an_idle_node_whose_slices_are_current_is_left_alone(make_cluster: MakeCluster) -> None:
    cluster = _start(make_cluster)
    uid, starts = _dra_pod_uid(cluster), cluster.kubelet.dra.starts if cluster.kubelet.dra else 0
    agent, _ = cluster.build_agent()

    agent.reconcile_once()

    assert _dra_pod_uid(cluster) == uid
    assert cluster.kubelet.dra is not None
    assert cluster.kubelet.dra.starts == starts


def test_stale_slices_on_a_correct_node_get_the_dra_plugin_restarted(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(DRA, "components/dra-driver")
    cluster.api.delete_resource_slice(f"{cluster.config.node_name}-gpu.nvidia.com")  # as if it enumerated nothing
    uid = _dra_pod_uid(cluster)

    cluster.start_agent(cluster.options(plugin_settle_s=0.5))

    eventually(lambda: state(cluster) == "success", what="the node reported after the restart")
    assert _dra_pod_uid(cluster) != uid
    assert _sliced_mig_uuids(cluster) == _fake_mig_uuids(cluster)


def test_a_node_served_only_by_the_dra_driver_expects_nothing_in_allocatable(make_cluster: MakeCluster) -> None:
    config = replace(DRA, plugin_mode="absent", labels={})
    cluster = _start(make_cluster, config, device_plugin=False)

    cluster.label("all-balanced")

    eventually(lambda: _applied(cluster, "all-balanced"), what="all-balanced applied on a DRA-only node")
    assert cluster.kubelet.plugin_resources() == {}
    assert _sliced_mig_uuids(cluster) == _fake_mig_uuids(cluster)


def test_the_dra_agent_lists_only_its_nodes_slices_of_gpu_nvidia_com(make_cluster: MakeCluster) -> None:
    cluster = _start(make_cluster)
    cluster.label("all-balanced")
    eventually(lambda: _applied(cluster, "all-balanced"), what="all-balanced applied")

    lists = [r for r in cluster.api.requests if r.resource == "resourceslices"]
    assert lists, "the agent never read the ResourceSlices"
    assert {(r.verb, r.status, r.api_group) for r in lists} == {("list", 200, "resource.k8s.io")}
    assert {r.query.get("fieldSelector") for r in lists} == {"spec.nodeName=gpu-node-1,spec.driver=gpu.nvidia.com"}
