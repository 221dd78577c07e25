"""What the fake kubelet's device plugin (mixed strategy) makes the Node advertise."""

from __future__ import annotations

import os
from collections.abc import Callable

from kubernetes import client as k8s

from migagent.podresources import PodResourcesClient
from migagent.sim import FakeNvml
from migagent_sim.apiserver import FakeApiServer
from migagent_sim.kubelet import FakeKubelet
from tests.integration.kubelet.support import NODE, lay_out


def test_each_full_mig_profile_is_advertised_as_a_string_count_read_through_the_real_client(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], core_v1: k8s.CoreV1Api
) -> None:
    lay_out(fake, 0, [("1g.10gb", start) for start in range(7)])
    lay_out(fake, 1, [("3g.40gb", 0), ("3g.40gb", 4)])
    make_kubelet()

    status = core_v1.read_node(NODE).to_dict(serialize=True)["status"]

    assert status["allocatable"]["nvidia.com/mig-1g.10gb"] == "7"
    assert status["allocatable"]["nvidia.com/mig-3g.40gb"] == "2"
    assert status["capacity"]["nvidia.com/mig-3g.40gb"] == "2"
    assert "nvidia.com/gpu" not in status["allocatable"]


def test_advertised_reports_the_mig_resources_as_integers(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet]
) -> None:
    lay_out(fake, 0, [("7g.80gb", 0)])
    lay_out(fake, 1, [("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)])

    kubelet = make_kubelet()

    assert kubelet.advertised() == {
        "nvidia.com/mig-7g.80gb": 1,
        "nvidia.com/mig-4g.40gb": 1,
        "nvidia.com/mig-2g.20gb": 1,
        "nvidia.com/mig-1g.10gb": 1,
    }


def test_a_media_extension_profile_is_advertised_as_its_plain_profile_as_nvidia_plugin_v0_18_2_does(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet]
) -> None:
    """Found against NVIDIA's plugin (tests/nvidia): its `1g.10gb` pattern matches `1g.10gb+me` first."""
    lay_out(fake, 0, [("1g.10gb+me", 0), ("1g.10gb", 1)])

    assert make_kubelet().advertised() == {"nvidia.com/mig-1g.10gb": 2}


def test_a_gpu_with_mig_disabled_stays_nvidia_com_gpu(api: FakeApiServer, socket_path: str) -> None:
    fake = FakeNvml.from_spec("H100-80GB-SXM,H100-80GB-SXM")
    api.add_node(NODE, labels={"nvidia.com/gpu.deploy.device-plugin": "true"})
    with FakeKubelet(api, fake, node_name=NODE, socket_path=socket_path) as kubelet:
        assert api.node(NODE)["status"]["allocatable"]["nvidia.com/gpu"] == "2"
        assert kubelet.advertised() == {}


def test_compute_instances_smaller_than_their_gi_are_advertised_as_the_gi_as_nvidia_plugin_v0_18_2_does(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet]
) -> None:
    """Found against NVIDIA's plugin (tests/nvidia): the `2g.20gb` pattern matches `1c.2g.20gb`; no exit."""
    lay_out(fake, 0, [("1g.10gb", 0)])
    lay_out(fake, 1, [("2g.20gb", 0)], ci_slices=1)  # two 1c.2g.20gb devices

    kubelet = make_kubelet()

    assert kubelet.plugin_error is None
    assert kubelet.advertised() == {"nvidia.com/mig-1g.10gb": 1, "nvidia.com/mig-2g.20gb": 2}


def test_get_allocatable_resources_lists_the_registered_mig_uuids(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], socket_path: str
) -> None:
    small = lay_out(fake, 0, [("1g.10gb", 0), ("1g.10gb", 1)])
    large = lay_out(fake, 1, [("7g.80gb", 0)])
    make_kubelet()

    allocatable = PodResourcesClient(socket_path).allocatable()

    assert allocatable == {"nvidia.com/mig-1g.10gb": tuple(small), "nvidia.com/mig-7g.80gb": tuple(large)}
    assert all(uuid.startswith("MIG-") for uuid in small + large)


def test_the_kubelet_registers_its_node_when_the_apiserver_has_none(
    fake: FakeNvml, api: FakeApiServer, socket_path: str
) -> None:
    lay_out(fake, 0, [("3g.40gb", 0)])
    with FakeKubelet(api, fake, node_name="fresh-node", socket_path=socket_path, plugin_mode="daemonset") as kubelet:
        assert api.node("fresh-node")["metadata"]["name"] == "fresh-node"
        assert kubelet.advertised() == {"nvidia.com/mig-3g.40gb": 1}


def test_without_the_deploy_label_the_gpu_operator_plugin_never_runs(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], api: FakeApiServer
) -> None:
    lay_out(fake, 0, [("3g.40gb", 0)])

    kubelet = make_kubelet(labels={})

    assert kubelet.plugin_pod is None
    assert [p for p in api.pods(NODE) if p["metadata"]["labels"].get("app") == "nvidia-device-plugin-daemonset"] == []
    assert kubelet.advertised() == {}


def test_stopping_the_kubelet_removes_its_pod_resources_socket(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], socket_path: str
) -> None:
    kubelet = make_kubelet()
    assert os.path.exists(socket_path)
    kubelet.stop()
    assert not os.path.exists(socket_path)
