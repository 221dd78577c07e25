"""A standalone device plugin (its own Helm chart) is really off the GPUs while they change.

The agent pauses it with nvidia.com/gpu.deploy.device-plugin, which the plugin's DaemonSet avoids
once patched (deploy/overlays/standalone/device-plugin-affinity.json), and counts only the pods of
that DaemonSet: the chart gives GPU Feature Discovery the same labels."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from migagent.attempt.phases import AgentPhase, Outcome
from migagent.node.names import deploy_label
from migagent_sim.cluster import SimCluster, SimClusterConfig
from tests.integration.agent.support import assert_released, condition, state

NS = "nvidia-device-plugin"
LABELS = {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvdp"}
PLUGIN_DS = "nvdp-nvidia-device-plugin"


STANDALONE_CONFIG = SimClusterConfig(
    spec="2xH100-80GB-SXM",
    start_layout="all-1g.10gb",
    plugin_mode="node-label",
    labels={},
    plugin_namespace=NS,
    plugin_labels=LABELS,
    plugin_daemonset=PLUGIN_DS,
)
"""NVIDIA's standalone device plugin chart: its own namespace, labels and DaemonSet, no operator labels."""


def _standalone(workdir: Path) -> SimCluster:
    cluster = SimCluster(workdir, STANDALONE_CONFIG)
    cluster.start()
    cluster.api.create_pod(
        node_name=STANDALONE_CONFIG.node_name, namespace=NS, name="nvdp-gfd-x1", labels=LABELS,
        owner_kind="DaemonSet", owner_name=f"{PLUGIN_DS}-gpu-feature-discovery",
    )
    return cluster


def test_the_plugin_pod_is_gone_while_the_gpus_change_and_back_afterwards_gfd_untouched(tmp_path: Path) -> None:
    cluster = _standalone(tmp_path)
    try:
        before = (cluster.kubelet.plugin_pod or {})["metadata"]["uid"]
        plugin_during_apply: list[object] = []

        def hook(phase: AgentPhase) -> None:
            if phase is AgentPhase.APPLY:
                plugin_during_apply.append(cluster.kubelet.plugin_pod)

        options = replace(
            cluster.options(), restart="node-label", operator_namespace=NS,
            plugin_selector="app.kubernetes.io/name=nvidia-device-plugin", plugin_daemonset=PLUGIN_DS,
        )
        agent, _ = cluster.build_agent(options, phase_hook=hook)
        cluster.label("all-7g")

        assert agent.reconcile_once() is Outcome.APPLIED

        assert plugin_during_apply == [None], "the plugin was running while the GPUs changed"
        after = cluster.kubelet.plugin_pod
        assert after is not None
        assert after["metadata"]["uid"] != before
        assert cluster.node()["metadata"]["labels"][deploy_label("device-plugin")] == "true"
        assert "nvdp-gfd-x1" in {p["metadata"]["name"] for p in cluster.api.pods(cluster.config.node_name)}
        assert cluster.kubelet.advertised() == {"nvidia.com/mig-1g.10gb": 0, "nvidia.com/mig-7g.80gb": 2}
        assert state(cluster) == "success"
        assert_released(cluster)
    finally:
        cluster.stop()


def test_a_selector_that_also_matches_gfd_waits_for_a_pod_that_never_leaves(tmp_path: Path) -> None:
    # Why --device-plugin-daemonset exists: labels alone also match GFD, which the pause does not remove.
    cluster = _standalone(tmp_path)
    try:
        options = replace(
            cluster.options(), restart="node-label", operator_namespace=NS,
            plugin_selector="app.kubernetes.io/name=nvidia-device-plugin", plugin_timeout_s=0.5,
        )
        agent, _ = cluster.build_agent(options)
        cluster.label("all-7g")

        assert agent.reconcile_once() is Outcome.FAILED

        assert "nvdp-gfd-x1" in condition(cluster)["message"]
        assert cluster.node()["metadata"]["labels"][deploy_label("device-plugin")] == "true"
        assert_released(cluster)
    finally:
        cluster.stop()
