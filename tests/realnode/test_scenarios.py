"""The agent as it ships, on a real kubelet with real containers: each scenario writes the node's
`nvidia.com/mig.config` as an admin does and judges by the real kubelet's allocatable, by PodResources,
and by which containers kept running (the same containerd container ID is the same process).

The node starts each test at `start` (GPU 0: 4g.40gb + 2g.20gb + 1g.10gb, GPU 1: 7g.80gb) and the
change is to `target` (GPU 0: the 4g.40gb kept, a 3g.40gb in place of the others; GPU 1 untouched):
each profile sits on one GPU instance, so a pod asking for `mig-2g.20gb` is on the instance the change
destroys, whichever device the kubelet picks.
"""

from __future__ import annotations

import pytest

from tests.realnode.cluster import (
    APP,
    MIG_CONFIG,
    PLUGIN_DS,
    PLUGIN_LABELS,
    PLUGIN_NS,
    START_RESOURCES,
    TARGET_RESOURCES,
    WORKLOAD_NS,
    Cluster,
    budget,
    gpu_pods,
    guarded_pod,
    kill_agent,
    mig_devices,
    when_gpus_change,
)
from tests.waiting import eventually

pytestmark = pytest.mark.xdist_group("realnode")
PLUGIN_SELECTOR = ",".join(f"{k}={v}" for k, v in PLUGIN_LABELS.items())


def _plugin_uids(cluster: Cluster) -> set[str]:
    return {p["metadata"]["uid"] for p in cluster.pods(PLUGIN_NS, PLUGIN_SELECTOR)}


def _uncordoned(cluster: Cluster) -> bool:
    return not cluster.node.node()["spec"].get("unschedulable", False)


def test_a_label_change_without_pods_is_applied_and_the_real_kubelet_advertises_it(fresh: Cluster) -> None:
    plugin_before = _plugin_uids(fresh)
    fresh.label({MIG_CONFIG: "target"})
    fresh.wait_settled("target", TARGET_RESOURCES)
    eventually(lambda: _uncordoned(fresh), "the node uncordoned", timeout_s=30)  # just after `success`
    # The agent paused the plugin with its node label; the real DaemonSet controller made a new pod.
    plugin_after = _plugin_uids(fresh)
    assert plugin_after
    assert plugin_after.isdisjoint(plugin_before)


def test_only_the_pod_on_a_changed_instance_is_evicted_and_the_others_keep_their_containers(fresh: Cluster) -> None:
    gpu_pods(fresh)
    held = fresh.devices()
    assert set(held) == {"train-kept", "infer-changed", "infer-untouched"}, held
    before = fresh.container_ids()
    fresh.label({MIG_CONFIG: "target"})
    fresh.wait_settled("target", TARGET_RESOURCES)
    eventually(lambda: fresh.pod(WORKLOAD_NS, "infer-changed") is None, "the evicted pod gone", timeout_s=60)
    after = fresh.container_ids()
    assert after == {name: before[name] for name in ("train-kept", "infer-untouched")}
    # They still hold the same devices, which the change kept.
    assert fresh.devices() == {name: held[name] for name in ("train-kept", "infer-untouched")}
    assert set(held["train-kept"] + held["infer-untouched"]) <= mig_devices(fresh.driver.state)


def test_a_budget_that_allows_the_eviction_later_delays_the_change_until_then(fresh: Cluster) -> None:
    owner = guarded_pod(fresh, replicas=2)
    budget(fresh, max_unavailable=1)  # 1 of the 2 expected pods is healthy: no disruption allowed
    devices = mig_devices(fresh.driver.state)
    fresh.label({MIG_CONFIG: "target"})
    eventually(lambda: fresh.node.node()["spec"].get("unschedulable", False), "the node cordoned", timeout_s=60)
    assert fresh.pod(WORKLOAD_NS, "inference-0") is not None
    assert mig_devices(fresh.driver.state) == devices, "the GPUs changed before the budget allowed the eviction"
    fresh.run_workload("inference-1", None, labels=APP, owner=owner)  # the other replica is Ready
    fresh.wait_settled("target", TARGET_RESOURCES)
    assert set(fresh.container_ids()) == {"inference-1"}


def test_a_budget_that_never_allows_the_eviction_fails_the_change_and_touches_nothing(fresh: Cluster) -> None:
    guarded_pod(fresh, replicas=1)
    budget(fresh, max_unavailable=0)
    devices = mig_devices(fresh.driver.state)
    before = fresh.container_ids()
    fresh.label({MIG_CONFIG: "target"})
    eventually(lambda: fresh.state() == ("target", "failed"), "the change failed", timeout_s=120)
    assert mig_devices(fresh.driver.state) == devices
    assert fresh.container_ids() == before
    assert fresh.node.allocatable() == START_RESOURCES
    eventually(lambda: _uncordoned(fresh), "the node uncordoned", timeout_s=30)


def test_the_agent_killed_mid_change_is_restarted_by_the_kubelet_and_converges(fresh: Cluster) -> None:
    agent = fresh.agent_pod()
    container = agent["status"]["containerStatuses"][0]
    devices = mig_devices(fresh.driver.state)
    fresh.label({MIG_CONFIG: "target"})
    when_gpus_change(fresh, devices)
    kill_agent(fresh)
    fresh.wait_settled("target", TARGET_RESOURCES)
    restarted = fresh.agent_pod()
    assert restarted["metadata"]["uid"] == agent["metadata"]["uid"]  # the same pod, its container restarted
    assert restarted["status"]["containerStatuses"][0]["restartCount"] > container["restartCount"]


def test_a_device_plugin_that_does_not_come_back_fails_the_change_clearly(fresh: Cluster) -> None:
    daemonsets = f"/apis/apps/v1/namespaces/{PLUGIN_NS}/daemonsets/{PLUGIN_DS}"
    original = fresh.admin.get(daemonsets)
    broken = {"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": None}, "template": {"spec": {
        "containers": [{"name": "nvidia-device-plugin-ctr", "image": "localhost/nvidia-device-plugin:absent"}]}}}}
    fresh.admin.patch(daemonsets, broken)  # the running pod stays; the next one cannot start
    try:
        fresh.label({MIG_CONFIG: "target"})
        eventually(lambda: fresh.state() == ("target", "failed"), "the change failed", timeout_s=180)
        error = fresh.node.node()["metadata"]["annotations"].get("migagent.io/last-error", "")
        assert "device plugin" in error or "advertis" in error, error
    finally:
        fresh.plane.apply([_strip(original)])
        for pod in fresh.pods(PLUGIN_NS, PLUGIN_SELECTOR):
            fresh.admin.delete(f"/api/v1/namespaces/{PLUGIN_NS}/pods/{pod['metadata']['name']}")


def test_a_node_rebooted_mid_change_resumes_from_the_agents_journal(fresh: Cluster) -> None:
    agent = fresh.agent_pod()
    devices = mig_devices(fresh.driver.state)
    fresh.label({MIG_CONFIG: "target"})
    when_gpus_change(fresh, devices)
    fresh.node.reboot()
    fresh.wait_settled("target", TARGET_RESOURCES, timeout_s=240)
    assert fresh.agent_pod()["metadata"]["uid"] == agent["metadata"]["uid"]


def _strip(obj: dict[str, object]) -> dict[str, object]:
    """`obj` as an admin would apply it again: no server-set metadata or status."""
    metadata = dict(obj["metadata"])  # type: ignore[call-overload]
    for key in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "annotations"):
        metadata.pop(key, None)
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": metadata}
