"""The agent deployed by deploy/overlays/gpu-operator on the real node, among the GPU Operator's pieces
(operator.py): the runtime class `nvidia`, the operator validator's markers, NVIDIA's device plugin as the
operator's DaemonSet on its deploy label, nvidia-ctk in the toolkit's directory. Judged as the
standalone scenarios are (the real kubelet's allocatable, PodResources, containerd's container IDs), and
by what the operator's own DaemonSets did while the agent held their deploy labels.
"""

from __future__ import annotations

import pytest

from tests.realnode.cluster import MIG_CONFIG, TARGET_RESOURCES, WORKLOAD_NS, Cluster, gpu_pods, mig_devices
from tests.realnode.operator import (
    CDI_SPEC,
    DEPLOY,
    DRIVER_ROOT,
    GPU_OPERATOR,
    OPERATOR_LABELS,
    PAUSED,
    PAUSED_DURING_CHANGE,
    PLUGIN_SELECTOR,
    VALIDATOR_SELECTOR,
    cdi_spec,
    operator_pod_uids,
)
from tests.waiting import eventually

pytestmark = pytest.mark.xdist_group("realnode")


def test_the_agent_waits_for_the_operator_validators_markers_before_using_nvml(operator_node: Cluster) -> None:
    # Deployed before the validator (operator.py), the agent said so in its Node condition; the validator
    # then wrote the markers and the agent went on to `start` (the fixture waited for it).
    assert "driver-ready, toolkit-ready" in GPU_OPERATOR.waiting_message, GPU_OPERATOR.waiting_message
    assert operator_node.state() == ("start", "success")


def test_a_change_pauses_the_operators_plugin_evicts_only_the_changed_instance_and_restores_the_labels(
    operator_node: Cluster,
) -> None:
    node = operator_node
    gpu_pods(node)
    held = node.devices()
    before = node.container_ids()
    plugin, validator = operator_pod_uids(node, PLUGIN_SELECTOR), operator_pod_uids(node, VALIDATOR_SELECTOR)
    assert plugin
    assert validator
    node.node.run("rm", "-f", CDI_SPEC)
    node.label({MIG_CONFIG: "target"})

    def paused_and_plugin_gone() -> bool:
        labels = node.labels()
        paused = all(labels.get(label) == PAUSED for label in PAUSED_DURING_CHANGE)
        return paused and not operator_pod_uids(node, PLUGIN_SELECTOR)

    # The real DaemonSet controller takes the plugin's pod off the node once its label is paused.
    eventually(paused_and_plugin_gone, "the plugin paused and its pod removed", timeout_s=120, poll_s=0.05)
    labels = node.labels()
    assert labels[f"{DEPLOY}dcgm-exporter"] == "false"  # an admin's `false` is not paused
    node.wait_settled("target", TARGET_RESOURCES)
    eventually(lambda: node.pod(WORKLOAD_NS, "infer-changed") is None, "the evicted pod gone", timeout_s=60)

    # Every deploy label as the operator (and the admin) left it: the paused ones back to `true`.
    assert {k: node.labels().get(k) for k in OPERATOR_LABELS} == OPERATOR_LABELS
    # NVIDIA's nvidia-ctk wrote the management CDI spec from the driver's root after the change.
    spec = cdi_spec(node)
    assert spec is not None, f"no management CDI spec after the change:\n{node.agent_log(300)}"
    assert "kind: management.nvidia.com/gpu" in spec
    assert f"hostPath: {DRIVER_ROOT}/dev/nvidia0" in spec
    # The controller made a new plugin pod, which advertised the new layout; the agent restarted the validator.
    assert operator_pod_uids(node, PLUGIN_SELECTOR).isdisjoint(plugin)
    eventually(lambda: bool(operator_pod_uids(node, VALIDATOR_SELECTOR) - validator), "a new validator pod",
               timeout_s=60)  # fmt: skip
    # Only the pod on the changed instance left; the others run on in the same containers and devices.
    kept = ("train-kept", "infer-untouched")
    assert node.container_ids() == {name: before[name] for name in kept}
    assert node.devices() == {name: held[name] for name in kept}
    assert set(held["train-kept"] + held["infer-untouched"]) <= mig_devices(node.driver.state)
