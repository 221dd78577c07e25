"""ResourceSlices (resource.k8s.io/v1, cluster-scoped) and ConfigMaps through the real `kubernetes` client:
what the DRA driver publishes and where the device plugin keeps its sharing configs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes.client import CoreV1Api, ResourceV1Api
from kubernetes.client.exceptions import ApiException

from migagent.kube.client import make_api_client
from migagent_sim.apiserver import FakeApiServer
from tests.integration.kube_apiserver.support import watch_stream

JsonDict = dict[str, object]


def _slice(node: str, driver: str) -> JsonDict:
    return {
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0-mig-19-0-1", "attributes": {"type": {"string": "mig"}}}],
        },
    }


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as api:
        yield api


def test_resource_slices_list_by_node_and_driver_field_selectors(server: FakeApiServer) -> None:
    for node in ("n1", "n2"):
        for driver in ("gpu.nvidia.com", "other.example.com"):
            server.put_resource_slice(_slice(node, driver))
    api = ResourceV1Api(make_api_client(kubeconfig=None, api_server=server.url))

    found = api.list_resource_slice(field_selector="spec.nodeName=n1,spec.driver=gpu.nvidia.com")

    assert [s.metadata.name for s in found.items if s.metadata is not None] == ["n1-gpu.nvidia.com"]
    devices = found.items[0].spec.devices or []
    assert (devices[0].attributes or {})["type"].string == "mig"


def test_a_field_a_resource_slice_cannot_be_selected_by_is_a_400(server: FakeApiServer) -> None:
    api = ResourceV1Api(make_api_client(kubeconfig=None, api_server=server.url))
    with pytest.raises(ApiException) as error:
        api.list_resource_slice(field_selector="spec.devices=x")
    assert error.value.status == 400


def test_resource_slices_are_watched_as_the_dra_plugin_republishes(server: FakeApiServer) -> None:
    api = ResourceV1Api(make_api_client(kubeconfig=None, api_server=server.url))
    server.put_resource_slice(_slice("n2", "gpu.nvidia.com"))  # another node's: not in the stream below
    listed = api.list_resource_slice().metadata
    assert listed is not None
    version = listed.resource_version
    server.put_resource_slice(_slice("n1", "gpu.nvidia.com"))
    republished = _slice("n1", "gpu.nvidia.com")
    republished["spec"]["pool"]["generation"] = 2  # type: ignore[index]
    server.put_resource_slice(republished)

    events = list(
        watch_stream(
            api.list_resource_slice, resource_version=version, timeout_seconds=1, field_selector="spec.nodeName=n1"
        )
    )

    assert [(e["type"], e["object"].spec.pool.generation) for e in events] == [("ADDED", 1), ("MODIFIED", 2)]


def test_a_config_map_is_read_by_name_and_a_missing_one_is_a_404(server: FakeApiServer) -> None:
    server.put_config_map("gpu-operator", "time-slicing-config", {"any": "version: v1\n"})
    core = CoreV1Api(make_api_client(kubeconfig=None, api_server=server.url))

    assert core.read_namespaced_config_map("time-slicing-config", "gpu-operator").data == {"any": "version: v1\n"}
    with pytest.raises(ApiException) as error:
        core.read_namespaced_config_map("nope", "gpu-operator")
    assert error.value.status == 404
