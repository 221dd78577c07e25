"""The agent's integration scenarios against the real control plane.

The scenario functions are the fast suite's own (imported from tests/integration/agent, so they are one
code), run here with `cluster`/`make_cluster` fixtures that give a simulated node (`AnySimulation`) whose
Kubernetes is the real kube-apiserver (tests/realkube/world.py): the agent authenticates with its pod-bound token, under
the RBAC and admission policies of the overlay that matches the plugin mode, applied with kubectl;
the simulated kubelet and device plugin are clients of the same server. Scenarios that read the fake
server's request log or inject its faults stay in the fast suite only; the drain-with-budget scenarios,
whose budgets the real disruption controller computes, are written here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from migagent.attempt.listener import Outcome
from migagent.attempt.window.post_change import CdiSettings, PostChangeSteps
from migagent.attempt.window.services import HostClients, RecordingServiceManager
from migagent.node.names import deploy_label
from migagent_sim.cluster import AnySimulation, SimClusterConfig
from migagent_sim.nvidia_ctk import FakeNvidiaTools
from tests.integration.agent.support import (
    SMALL,
    SMALL_ALL_1G,
    SMALL_BALANCED,
    advertised,
    advertised_of,
    assert_released,
    condition,
    condition_of,
    node_when,
    state,
    state_of,
    workload_names,
)
from tests.integration.agent.test_crash import (
    test_an_agent_killed_in_the_middle_of_the_apply_is_finished_by_a_restarted_agent,
)
from tests.integration.agent.test_failures import (
    test_a_layout_the_device_plugin_cannot_advertise_is_refused_before_anything_changes,
)
from tests.integration.agent.test_one_disruption_per_change import (
    test_a_label_change_between_nvml_steps_re_plans_to_the_new_layout_with_one_cordon,
)
from tests.integration.agent.test_reconfigure import (
    test_a_label_change_ends_in_success_with_exactly_the_new_resources_advertised,
    test_an_admin_cordoned_node_stays_cordoned_after_the_change,
    test_the_delete_pod_strategy_restarts_a_daemonset_plugin_and_reaches_success,
)
from tests.integration.agent.test_standalone_plugin import LABELS, NS, PLUGIN_DS, STANDALONE_CONFIG
from tests.realkube.control_plane import ControlPlane
from tests.realkube.deployment import (
    FORCE_DELETE,
    GPU_OPERATOR,
    STANDALONE,
    STANDALONE_DELETE_POD,
    Deployer,
    ensure_namespace,
    ensure_owner,
)
from tests.realkube.world import RealSimCluster

OPERATOR_NS = "gpu-operator"
SCENARIOS = (
    test_a_label_change_ends_in_success_with_exactly_the_new_resources_advertised,
    test_an_admin_cordoned_node_stays_cordoned_after_the_change,
    test_the_delete_pod_strategy_restarts_a_daemonset_plugin_and_reaches_success,
    test_an_agent_killed_in_the_middle_of_the_apply_is_finished_by_a_restarted_agent,
    test_a_layout_the_device_plugin_cannot_advertise_is_refused_before_anything_changes,
    test_a_label_change_between_nvml_steps_re_plans_to_the_new_layout_with_one_cordon,
)


@pytest.fixture
def make_cluster(
    control_plane: ControlPlane, deployer: Deployer, tmp_path: Path
) -> Iterator[Callable[[SimClusterConfig], AnySimulation]]:
    """As tests/integration/agent's fixture: the standalone overlay with delete-pod-restart for a daemonset
    plugin, else gpu-operator; installed on the real server, the agent bound to the cluster's node."""
    started: list[AnySimulation] = []

    def make(config: SimClusterConfig = SMALL) -> AnySimulation:
        assert not started, "one cluster per test: they would share the node"
        variant = STANDALONE_DELETE_POD if config.plugin_mode == "daemonset" else GPU_OPERATOR
        objects = deployer.install(variant)
        account = next(o for o in objects if o["kind"] == "ServiceAccount")["metadata"]
        cluster = RealSimCluster(
            control_plane, tmp_path / "cluster", config, agent_account=(account["namespace"], account["name"])
        ).start()
        started.append(cluster)
        return cluster

    yield make
    for cluster in started:
        cluster.stop()


@pytest.fixture
def cluster(make_cluster: Callable[[SimClusterConfig], AnySimulation]) -> AnySimulation:
    return make_cluster(SMALL)


def _real(cluster: AnySimulation) -> RealSimCluster:
    assert isinstance(cluster, RealSimCluster)
    return cluster


def _guarded_workloads(cluster: AnySimulation) -> None:
    """inference-0 on a GI that all-balanced destroys (GPU 0, slot 6), and a peer of its ReplicaSet
    (replicas 2) still starting elsewhere; a budget with maxUnavailable 1. The disruption controller
    then allows no disruption until the peer is Ready: blocked for now, not for good."""
    real = _real(cluster).api
    labels = {"app": "inference"}
    ensure_namespace(real.plane, "ml")
    ensure_owner(real.plane, "ReplicaSet", "ml", "inference-0-owner", replicas=2)
    cluster.kubelet.run_workload("ml", "inference-0", mig_uuid=cluster.mig_uuid(0, 6), labels=labels)
    real.create_pod(
        node_name=None,
        namespace="ml",
        name="inference-1",
        labels=labels,
        owner_kind="ReplicaSet",
        owner_name="inference-0-owner",
        replicas=2,
    )
    real.add_pdb("ml", "inference-pdb", match_labels=labels, max_unavailable=1)
    real.pdb_status("ml", "inference-pdb", allowed=0)


def test_a_pdb_blocking_for_now_makes_the_drain_wait_until_the_disruption_controller_allows(
    cluster: AnySimulation,
) -> None:
    real = _real(cluster).api
    _guarded_workloads(cluster)
    running = cluster.start_agent()
    try:
        node_when(cluster, lambda n: state_of(n) == "success", what="the starting layout reported")
        cluster.label("all-balanced")
        # One read judged whole: the state label and the condition are two writes (a first report may
        # show `success` before its condition exists).
        draining = node_when(
            cluster, lambda n: (condition_of(n) or {}).get("reason") == "Draining", what="the drain on the budget"
        )
        assert state_of(draining) == "pending"
        assert "inference-0" in workload_names(cluster)
        # The peer becomes Ready elsewhere (bound to another node by the "scheduler", Running there).
        real.create_pod(
            node_name="elsewhere",
            namespace="ml",
            name="inference-2",
            labels={"app": "inference"},
            owner_kind="ReplicaSet",
            owner_name="inference-0-owner",
            replicas=2,
        )
        node_when(
            cluster,
            lambda n: advertised_of(n) == SMALL_BALANCED and state_of(n) == "success",
            what="all-balanced once the budget allowed",
            timeout_s=90,
        )
    finally:
        running.stop()
    assert "inference-0" not in workload_names(cluster)
    assert_released(cluster)


def test_a_pdb_that_never_allows_fails_the_change_and_undoes_nothing_it_did_not_do(cluster: AnySimulation) -> None:
    real = _real(cluster).api
    cluster.kubelet.run_workload("ml", "inference-0", mig_uuid=cluster.mig_uuid(0, 6), labels={"app": "inference"})
    real.add_pdb("ml", "inference-pdb", match_labels={"app": "inference"}, max_unavailable=0)
    real.pdb_status("ml", "inference-pdb", allowed=0)
    agent, _ = cluster.build_agent(cluster.options(drain_timeout_s=0.5))
    cluster.label("all-balanced")

    assert agent.reconcile_once() is Outcome.FAILED

    assert state(cluster) == "failed"
    failed = condition(cluster)
    assert (failed["status"], failed["reason"]) == ("False", "DrainBlocked")
    assert "inference-pdb" in failed["message"]
    assert_released(cluster)
    assert cluster.node()["metadata"]["labels"][deploy_label("device-plugin")] == "true"
    assert "inference-0" in workload_names(cluster)
    assert advertised(cluster) == SMALL_ALL_1G


def test_a_standalone_plugin_leaves_the_node_while_the_gpus_change_under_the_standalone_overlays_policy(
    control_plane: ControlPlane, deployer: Deployer, tmp_path: Path
) -> None:
    """The node-label restart of tests/integration/agent/test_standalone_plugin.py, where the label starts
    absent: the agent pauses it (absent -> paused, the standalone overlay's marker) and sets it to true."""
    objects = deployer.install(STANDALONE)
    account = next(o for o in objects if o["kind"] == "ServiceAccount")["metadata"]
    config = STANDALONE_CONFIG
    agent_account = (account["namespace"], account["name"])
    cluster = RealSimCluster(control_plane, tmp_path / "c", config, agent_account=agent_account)
    cluster.start()
    try:
        cluster.api.create_pod(
            node_name=config.node_name,
            namespace=NS,
            name="nvdp-gfd-x1",
            labels=LABELS,
            owner_kind="DaemonSet",
            owner_name=f"{PLUGIN_DS}-gpu-feature-discovery",
        )
        before = (cluster.kubelet.plugin_pod or {})["metadata"]["uid"]
        assert deploy_label("device-plugin") not in cluster.node()["metadata"]["labels"]
        options = replace(
            cluster.options(),
            restart="node-label",
            operator_namespace=NS,
            plugin_selector="app.kubernetes.io/name=nvidia-device-plugin",
            plugin_daemonset=PLUGIN_DS,
        )
        agent, _ = cluster.build_agent(options)
        cluster.label("all-7g")

        assert agent.reconcile_once() is Outcome.APPLIED

        after = cluster.kubelet.plugin_pod
        assert after is not None
        assert after["metadata"]["uid"] != before
        assert cluster.node()["metadata"]["labels"][deploy_label("device-plugin")] == "true"
        assert "nvdp-gfd-x1" in {p["metadata"]["name"] for p in cluster.api.pods(config.node_name)}
        assert advertised(cluster) == {"nvidia.com/mig-7g.80gb": 2}
        assert state(cluster) == "success"
        assert_released(cluster)
    finally:
        cluster.stop()
        deployer.install(GPU_OPERATOR)


def test_the_operator_validators_on_the_node_are_deleted_around_a_change_under_the_pod_policy(
    cluster: AnySimulation, tmp_path: Path
) -> None:
    """The agent's validator restarts (mig-manager's order) pass the pod policy: pods on its own node of
    the validator kinds; the same kind on another node stays."""
    real = _real(cluster).api
    made = {}
    for app in ("nvidia-cuda-validator", "nvidia-operator-validator"):
        made[app] = real.create_pod(
            node_name=cluster.config.node_name, namespace=OPERATOR_NS, name=app, labels={"app": app},
            owner_kind="DaemonSet", owner_name=f"{app}-ds",
        )["metadata"]["uid"]
    elsewhere = real.create_pod(
        node_name="gpu-elsewhere", namespace=OPERATOR_NS, name="nvidia-cuda-validator-elsewhere",
        labels={"app": "nvidia-cuda-validator"}, owner_kind="DaemonSet", owner_name="nvidia-cuda-validator-ds",
    )
    services = RecordingServiceManager(active=["nvidia-dcgm.service"])
    steps = PostChangeSteps(
        api=cluster.agent_api(),
        namespace=OPERATOR_NS,
        restart_validators=True,
        cdi=CdiSettings(driver_root="/run/nvidia/driver", output=tmp_path / "cdi" / "management.nvidia.com-gpu.yaml"),
        host_clients=HostClients(services, ["nvidia-dcgm.service"]),
        run=FakeNvidiaTools(cluster.fake),
    )
    agent, _ = cluster.build_agent(post_change=steps)
    cluster.label("all-7g")

    assert agent.reconcile_once() is Outcome.APPLIED

    left = {p["metadata"]["uid"] for p in real.pods(None) if not p["metadata"].get("deletionTimestamp")}
    assert not set(made.values()) & left, "a validator on the agent's node was not deleted"
    assert elsewhere["metadata"]["uid"] in left
    assert state(cluster) == "success"
    assert_released(cluster)


def test_force_delete_drains_a_budget_guarded_pod_under_the_components_pod_policy(
    control_plane: ControlPlane, deployer: Deployer, tmp_path: Path
) -> None:
    """With components/force-delete the agent drains by DELETE, which the pod policy allows for workload
    pods holding a GPU on its node (the marker the component grants), budget or not."""
    objects = deployer.install(FORCE_DELETE)
    account = next(o for o in objects if o["kind"] == "ServiceAccount")["metadata"]
    cluster = RealSimCluster(
        control_plane, tmp_path / "c", SMALL, agent_account=(account["namespace"], account["name"])
    ).start()
    try:
        _guarded_workloads(cluster)
        agent, _ = cluster.build_agent(cluster.options(drain_timeout_s=10.0, force_delete=True))
        cluster.label("all-balanced")

        assert agent.reconcile_once() is Outcome.APPLIED

        assert "inference-0" not in workload_names(cluster)
        assert advertised(cluster) == SMALL_BALANCED
        assert state(cluster) == "success"
        assert_released(cluster)
    finally:
        cluster.stop()
        deployer.install(GPU_OPERATOR)
