"""The device plugin pod's lifecycle and what each (re)start does to the Node's advertisement."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s

from migagent.clock import FakeClock
from migagent.podresources import PodResourcesClient
from migagent.sim import FakeNvml
from migagent_sim.apiserver import FakeApiServer
from migagent_sim.cluster import time_slicing_config
from migagent_sim.kubelet import FakeKubelet
from tests.integration.kubelet.conftest import DEPLOY_LABEL
from tests.integration.kubelet.support import NODE, GateClock, clear, eventually, lay_out

PLUGIN_SELECTOR = "app=nvidia-device-plugin-daemonset"


def _plugin_pods(
    core_v1: k8s.CoreV1Api, namespace: str = "gpu-operator", selector: str = PLUGIN_SELECTOR
) -> list[dict[str, Any]]:
    """Plugin pods on NODE as the agent lists them (wire JSON through the real client)."""
    pods = core_v1.list_namespaced_pod(namespace, label_selector=selector, field_selector=f"spec.nodeName={NODE}")
    return [pod.to_dict(serialize=True) for pod in pods.items]


def _set_deploy_label(core_v1: k8s.CoreV1Api, value: str) -> None:
    core_v1.patch_node(NODE, {"metadata": {"labels": {DEPLOY_LABEL: value}}})


def _mig_status(api: FakeApiServer, field: str) -> dict[str, str]:
    values = api.node(NODE)["status"][field]
    return {name: value for name, value in values.items() if name.startswith("nvidia.com/mig-")}


def test_pausing_the_gpu_operator_plugin_removes_its_pod_and_zeroes_allocatable_but_keeps_capacity(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], api: FakeApiServer, core_v1: k8s.CoreV1Api
) -> None:
    lay_out(fake, 0, [("3g.40gb", 0), ("3g.40gb", 4)])
    kubelet = make_kubelet()
    assert len(_plugin_pods(core_v1)) == 1

    _set_deploy_label(core_v1, "paused-for-mig-change")

    assert eventually(lambda: _plugin_pods(core_v1), until=lambda pods: pods == []) == []
    assert kubelet.plugin_pod is None
    assert _mig_status(api, "allocatable") == {"nvidia.com/mig-3g.40gb": "0"}
    assert _mig_status(api, "capacity") == {"nvidia.com/mig-3g.40gb": "2"}


def test_unpausing_advertises_the_new_layout_and_stale_resources_keep_capacity_until_the_grace_period_ends(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], api: FakeApiServer, core_v1: k8s.CoreV1Api
) -> None:
    """Stale: allocatable 0 at once; capacity keeps the old count for the kubelet's grace period (5 min)."""
    lay_out(fake, 0, [("3g.40gb", 0), ("3g.40gb", 4)])
    clock = FakeClock()
    kubelet = make_kubelet(clock=clock)
    (before,) = _plugin_pods(core_v1)
    _set_deploy_label(core_v1, "paused-for-mig-change")
    clear(fake, 0)
    new_uuids = lay_out(fake, 0, [("1g.10gb", start) for start in range(7)])

    _set_deploy_label(core_v1, "true")

    (after,) = eventually(lambda: _plugin_pods(core_v1), until=lambda pods: len(pods) == 1)
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    assert _mig_status(api, "allocatable") == {"nvidia.com/mig-3g.40gb": "0", "nvidia.com/mig-1g.10gb": "7"}
    assert _mig_status(api, "capacity") == {"nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-1g.10gb": "7"}
    assert kubelet.allocatable() == {"nvidia.com/mig-1g.10gb": tuple(new_uuids)}

    clock.advance(301)
    # A status tick, as the kubelet's own: whether it writes or the background tick (which may wake on a
    # loaded machine between the advance and this call) already did, the Node shows the grace period over.
    kubelet.sync_node_status()

    assert _mig_status(api, "capacity") == {"nvidia.com/mig-3g.40gb": "0", "nvidia.com/mig-1g.10gb": "7"}
    assert _mig_status(api, "allocatable") == {"nvidia.com/mig-3g.40gb": "0", "nvidia.com/mig-1g.10gb": "7"}


def test_a_false_deploy_label_keeps_the_plugin_away(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], core_v1: k8s.CoreV1Api
) -> None:
    lay_out(fake, 0, [("7g.80gb", 0)])
    kubelet = make_kubelet()

    _set_deploy_label(core_v1, "false")

    assert kubelet.plugin_pod is None
    assert kubelet.advertised() == {"nvidia.com/mig-7g.80gb": 0}


def test_a_deleted_gpu_operator_plugin_pod_comes_back_once_while_the_label_is_true(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], api: FakeApiServer, core_v1: k8s.CoreV1Api
) -> None:
    lay_out(fake, 0, [("7g.80gb", 0)])
    kubelet = make_kubelet()
    old = kubelet.plugin_pod
    assert old is not None

    api.delete_pod("gpu-operator", old["metadata"]["name"])

    new = kubelet.plugin_pod
    assert new is not None
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert [p["metadata"]["uid"] for p in _plugin_pods(core_v1)] == [new["metadata"]["uid"]]
    assert kubelet.advertised() == {"nvidia.com/mig-7g.80gb": 1}


def test_in_daemonset_mode_a_deleted_plugin_pod_is_recreated_with_a_new_name_and_uid(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], core_v1: k8s.CoreV1Api
) -> None:
    lay_out(fake, 0, [("4g.40gb", 0)])
    kubelet = make_kubelet(
        labels={},
        plugin_mode="daemonset",
        plugin_namespace="kube-system",
        plugin_labels={"name": "nvidia-device-plugin-ds"},
    )
    (old,) = _plugin_pods(core_v1, "kube-system", "name=nvidia-device-plugin-ds")
    clear(fake, 0)
    lay_out(fake, 0, [("2g.20gb", 0), ("2g.20gb", 2)])

    core_v1.delete_namespaced_pod(old["metadata"]["name"], "kube-system")

    (new,) = eventually(
        lambda: _plugin_pods(core_v1, "kube-system", "name=nvidia-device-plugin-ds"),
        until=lambda pods: len(pods) == 1 and pods[0]["metadata"]["uid"] != old["metadata"]["uid"],
    )
    assert new["metadata"]["name"] != old["metadata"]["name"]
    assert new["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    expected = {"nvidia.com/mig-4g.40gb": 0, "nvidia.com/mig-2g.20gb": 2}  # the pod shows before it registers
    assert eventually(kubelet.advertised, until=lambda adv: adv == expected) == expected


def test_the_new_advertisement_waits_for_the_plugin_lag_on_the_kubelets_clock(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], api: FakeApiServer, socket_path: str
) -> None:
    lay_out(fake, 0, [("7g.80gb", 0)])
    clock = GateClock()
    kubelet = make_kubelet(plugin_lag_s=30.0, clock=clock)
    assert kubelet.advertised() == {}  # registration is still waiting on the clock
    assert PodResourcesClient(socket_path).allocatable() == {}

    clock.release()

    assert eventually(kubelet.advertised, until=bool) == {"nvidia.com/mig-7g.80gb": 1}
    assert clock.waits == [30.0]
    assert api.node(NODE)["status"]["capacity"]["nvidia.com/mig-7g.80gb"] == "1"


def test_with_a_small_real_lag_the_advertisement_eventually_follows_a_restart(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], core_v1: k8s.CoreV1Api
) -> None:
    lay_out(fake, 0, [("3g.40gb", 0)])
    kubelet = make_kubelet(plugin_lag_s=0.2)
    eventually(kubelet.advertised, until=lambda adv: adv == {"nvidia.com/mig-3g.40gb": 1})
    _set_deploy_label(core_v1, "paused-for-mig-change")
    assert kubelet.advertised() == {"nvidia.com/mig-3g.40gb": 0}
    clear(fake, 0)
    lay_out(fake, 0, [("7g.80gb", 0)])

    _set_deploy_label(core_v1, "true")

    expected = {"nvidia.com/mig-3g.40gb": 0, "nvidia.com/mig-7g.80gb": 1}
    assert eventually(kubelet.advertised, until=lambda adv: adv == expected) == expected


def test_pausing_during_the_lag_cancels_the_pending_advertisement(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], core_v1: k8s.CoreV1Api
) -> None:
    lay_out(fake, 0, [("7g.80gb", 0)])
    clock = GateClock()
    kubelet = make_kubelet(plugin_lag_s=30.0, clock=clock)

    _set_deploy_label(core_v1, "paused-for-mig-change")
    clock.release()
    kubelet.stop()  # joins the registration thread, so any late write would have happened by now

    assert kubelet.advertised() == {}
    assert kubelet.allocatable() == {}


def test_a_config_label_naming_no_config_keeps_the_running_plugins_config_as_nvidia_config_manager_does(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], api: FakeApiServer, core_v1: k8s.CoreV1Api
) -> None:
    """Found against NVIDIA's config-manager (tests/nvidia): its sidecar exits, the plugin is not signalled."""
    lay_out(fake, 0, [("1g.10gb", start) for start in range(7)])
    configs = {"default": time_slicing_config(2), "four": time_slicing_config(4)}
    api.put_config_map("gpu-operator", "plugin-configs", configs)
    kubelet = make_kubelet(plugin_config_map=("gpu-operator", "plugin-configs"))
    assert kubelet.advertised() == {"nvidia.com/mig-1g.10gb": 14}  # the config named "default"

    core_v1.patch_node(NODE, {"metadata": {"labels": {"nvidia.com/device-plugin.config": "nine"}}})

    assert kubelet.advertised() == {"nvidia.com/mig-1g.10gb": 14}
    assert kubelet.plugin_config_restarts == 0
    assert kubelet.plugin_error is None


def test_with_a_node_status_period_a_change_reaches_the_node_at_the_next_tick_an_uncertain_lag(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], core_v1: k8s.CoreV1Api
) -> None:
    """nodeStatusUpdateFrequency (10 s) is the kubelet's; how soon a real Node shows a plugin's change was
    never measured, so the period is a setting (0 in the fast suite)."""
    lay_out(fake, 0, [("7g.80gb", 0)])
    kubelet = make_kubelet(node_status_period_s=2.0)
    assert eventually(kubelet.advertised, until=bool) == {"nvidia.com/mig-7g.80gb": 1}

    _set_deploy_label(core_v1, "paused-for-mig-change")

    assert kubelet.device_manager.capacity()[1] == {"nvidia.com/mig-7g.80gb": 0}
    assert kubelet.advertised() == {"nvidia.com/mig-7g.80gb": 1}, "not before the next status tick"
    assert eventually(kubelet.advertised, until=lambda adv: adv == {"nvidia.com/mig-7g.80gb": 0})
