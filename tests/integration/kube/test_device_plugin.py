"""Device-plugin restart strategies and the advertisement wait, through the fake apiserver."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from migagent.attempt.advertise.wait import AdvertisementTimeoutError, wait_for_advertisement
from migagent.attempt.window.deviceplugin import (
    DeletePod,
    GpuOperatorPause,
    NoRestart,
    PausedComponents,
)
from migagent.errors import TransientError
from migagent.kube.adapter import KubeApi
from migagent_sim.apiserver import FakeApiServer

from .conftest import NODE, HookedClock

OPERATOR_NS = "gpu-operator"
APPS = {
    "device-plugin": "nvidia-device-plugin-daemonset",
    "gpu-feature-discovery": "gpu-feature-discovery",
    "dcgm-exporter": "nvidia-dcgm-exporter",
}


def _labels(server: FakeApiServer) -> dict[str, str]:
    return dict(server.node(NODE)["metadata"]["labels"])


def _operator_pod(server: FakeApiServer, app: str, suffix: str = "a") -> None:
    server.create_pod(
        node_name=NODE, namespace=OPERATOR_NS, name=f"{app}-{suffix}", labels={"app": app}, owner_kind="DaemonSet"
    )


def _act_like_the_operator(server: FakeApiServer) -> None:
    """DaemonSets gated on `nvidia.com/gpu.deploy.<component>=true`: pods leave when it is anything else."""

    def on_change(node: dict[str, Any]) -> None:
        labels = node["metadata"].get("labels") or {}
        for component, app in APPS.items():
            if labels.get(f"nvidia.com/gpu.deploy.{component}") != "true":
                for pod in server.pods(NODE):
                    if pod["metadata"]["labels"].get("app") == app:
                        server.delete_pod(OPERATOR_NS, pod["metadata"]["name"])

    server.on_node_changed(on_change)


@pytest.fixture
def operator_node(server: FakeApiServer) -> FakeApiServer:
    server.update_node(
        NODE,
        lambda node: node["metadata"]["labels"].update(
            {
                "nvidia.com/gpu.deploy.device-plugin": "true",
                "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
                "nvidia.com/gpu.deploy.dcgm-exporter": "false",
            }
        ),
    )
    _operator_pod(server, APPS["device-plugin"])
    _operator_pod(server, APPS["gpu-feature-discovery"])
    return server


def test_pause_keeps_false_as_false_adds_no_labels_and_resume_restores_exactly_what_it_changed(
    api: KubeApi, operator_node: FakeApiServer, clock: HookedClock
) -> None:
    _act_like_the_operator(operator_node)
    restarter = GpuOperatorPause(api, clock=clock)
    paused = restarter.pause()
    labels = _labels(operator_node)
    assert labels["nvidia.com/gpu.deploy.device-plugin"] == "paused-for-mig-change"
    assert labels["nvidia.com/gpu.deploy.gpu-feature-discovery"] == "paused-for-mig-change"
    assert labels["nvidia.com/gpu.deploy.dcgm-exporter"] == "false"
    assert "nvidia.com/gpu.deploy.dcgm" not in labels
    assert operator_node.pods(NODE) == []
    restarter.resume(paused)
    labels = _labels(operator_node)
    assert labels["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert labels["nvidia.com/gpu.deploy.gpu-feature-discovery"] == "true"
    assert labels["nvidia.com/gpu.deploy.dcgm-exporter"] == "false"
    assert not any(key.endswith((".dcgm", ".nvsm", ".client")) for key in labels)


def test_pause_waits_on_the_clock_until_the_component_pods_have_left(
    api: KubeApi, operator_node: FakeApiServer, clock: HookedClock
) -> None:
    clock.at(3.0, lambda: operator_node.delete_pod(OPERATOR_NS, "nvidia-device-plugin-daemonset-a"))
    clock.at(5.0, lambda: operator_node.delete_pod(OPERATOR_NS, "gpu-feature-discovery-a"))
    GpuOperatorPause(api, clock=clock, poll_interval_s=1.0).pause()
    assert clock.elapsed >= 5.0
    assert operator_node.pods(NODE) == []


def test_pods_that_never_leave_make_pause_fail_and_put_the_labels_back(
    api: KubeApi, operator_node: FakeApiServer, clock: HookedClock
) -> None:
    with pytest.raises(TransientError, match=r"gpu-operator/nvidia-device-plugin-daemonset-a"):
        GpuOperatorPause(api, clock=clock, timeout_s=20).pause()
    labels = _labels(operator_node)
    assert labels["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert labels["nvidia.com/gpu.deploy.dcgm-exporter"] == "false"


def test_labels_left_paused_by_an_interrupted_change_are_resumed_to_true(
    api: KubeApi, operator_node: FakeApiServer, clock: HookedClock
) -> None:
    operator_node.update_node(
        NODE, lambda n: n["metadata"]["labels"].update({"nvidia.com/gpu.deploy.dcgm": "paused-for-mig-change"})
    )
    _act_like_the_operator(operator_node)
    restarter = GpuOperatorPause(api, clock=clock)
    restarter.resume(restarter.pause())
    assert _labels(operator_node)["nvidia.com/gpu.deploy.dcgm"] == "true"


def test_resume_leaves_a_label_an_admin_changed_meanwhile(
    api: KubeApi, operator_node: FakeApiServer, clock: HookedClock
) -> None:
    _act_like_the_operator(operator_node)
    restarter = GpuOperatorPause(api, clock=clock)
    paused = restarter.pause()
    api.patch_metadata(labels={"nvidia.com/gpu.deploy.gpu-feature-discovery": "false"})
    restarter.resume(paused)
    assert _labels(operator_node)["nvidia.com/gpu.deploy.gpu-feature-discovery"] == "false"
    assert _labels(operator_node)["nvidia.com/gpu.deploy.device-plugin"] == "true"


def test_delete_pod_restarts_the_plugin_and_waits_for_a_replacement(
    api: KubeApi, server: FakeApiServer, clock: HookedClock
) -> None:
    names = (f"plugin-{i}" for i in itertools.count(1))
    _operator_pod(server, APPS["device-plugin"], suffix=next(names))

    def recreate(pod: dict[str, Any]) -> None:
        if pod["metadata"]["labels"].get("app") == APPS["device-plugin"]:
            clock.at(clock.elapsed + 2.0, lambda: _operator_pod(server, APPS["device-plugin"], suffix=next(names)))

    server.on_pod_deleted(recreate)
    before = {p["metadata"]["uid"] for p in server.pods(NODE)}
    restarter = DeletePod(api, clock=clock)
    restarter.resume(restarter.pause())
    after = server.pods(NODE)
    assert [p["metadata"]["name"] for p in after] == ["nvidia-device-plugin-daemonset-plugin-2"]
    assert after[0]["metadata"]["uid"] not in before


def test_delete_pod_fails_when_no_replacement_comes_back(
    api: KubeApi, server: FakeApiServer, clock: HookedClock
) -> None:
    _operator_pod(server, APPS["device-plugin"])
    with pytest.raises(TransientError, match="no device plugin pod"):
        DeletePod(api, clock=clock, timeout_s=10).resume(PausedComponents())


def test_no_restart_touches_nothing(api: KubeApi, server: FakeApiServer) -> None:
    server.clear_requests()
    restarter = NoRestart()
    restarter.resume(restarter.pause())
    assert server.requests == []


def _advertise(server: FakeApiServer, counts: dict[str, str]) -> None:
    server.update_node(NODE, lambda node: node["status"]["allocatable"].update(counts))


def test_the_advertisement_wait_returns_once_allocatable_matches(
    api: KubeApi, server: FakeApiServer, clock: HookedClock
) -> None:
    expected = {"nvidia.com/mig-3g.20gb": 2}
    _advertise(server, {"nvidia.com/mig-1g.5gb": "0"})
    clock.at(4.0, lambda: _advertise(server, {"nvidia.com/mig-3g.20gb": "2"}))
    node = wait_for_advertisement(api.get_node, expected, timeout_s=60, clock=clock)
    assert node.allocatable["nvidia.com/mig-3g.20gb"] == 2
    assert node.allocatable["nvidia.com/mig-1g.5gb"] == 0


def test_the_advertisement_wait_times_out_naming_the_difference(
    api: KubeApi, server: FakeApiServer, clock: HookedClock
) -> None:
    with pytest.raises(AdvertisementTimeoutError, match=r"nvidia.com/mig-1g.5gb: advertised 7, expected 0") as info:
        wait_for_advertisement(api.get_node, {"nvidia.com/mig-3g.20gb": 2}, timeout_s=30, clock=clock)
    assert info.value.diff == {"nvidia.com/mig-1g.5gb": (7, 0), "nvidia.com/mig-3g.20gb": (0, 2)}
    assert isinstance(info.value, TransientError)
