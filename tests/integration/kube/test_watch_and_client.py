"""Watching our Node and building the client (real time here, with one-second server timeouts)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes.client import ApiClient

from migagent.clock import FakeClock
from migagent.errors import PermanentError, TransientError
from migagent.kube.adapter import KubeApi
from migagent.kube.client import make_api_client
from migagent.node.port import WatchExpired
from migagent_sim.apiserver import FakeApiServer

from .conftest import NODE


def test_watch_yields_our_node_after_a_label_change(api: KubeApi, server: FakeApiServer) -> None:
    start = api.get_node().resource_version
    api.patch_metadata(labels={"nvidia.com/mig.config": "all-3g.20gb"})
    for event in api.watch_node(start, timeout_s=1):
        if event.type == "MODIFIED":
            assert event.node is not None
            assert event.node.labels["nvidia.com/mig.config"] == "all-3g.20gb"
            assert event.resource_version == event.node.resource_version
            break
    else:
        pytest.fail("the watch ended without a MODIFIED event")


def test_watch_from_a_compacted_resource_version_raises_watch_expired(api: KubeApi, server: FakeApiServer) -> None:
    old = api.get_node().resource_version
    api.patch_metadata(labels={"a": "1"})
    server.compact()
    with pytest.raises(WatchExpired, match="expired") as info:
        list(api.watch_node(old, timeout_s=1))
    assert isinstance(info.value, TransientError)


def test_an_http_error_opening_the_watch_is_classified(api: KubeApi, server: FakeApiServer) -> None:
    server.inject_fault("GET", r"/api/v1/nodes$", 500)
    with pytest.raises(TransientError, match="watch node gpu-node-1"):
        list(api.watch_node(api.get_node().resource_version, timeout_s=1))


def test_a_kubeconfig_pointing_at_the_server_works(server: FakeApiServer, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "sim", "cluster": {"server": server.url}}],
                "users": [{"name": "agent", "user": {"token": "test"}}],
                "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "agent"}}],
                "current-context": "sim",
            }
        )
    )
    with make_api_client(kubeconfig=str(kubeconfig), api_server=None) as client:
        assert client.configuration.proxy is None
        assert KubeApi(client, node_name=NODE, clock=FakeClock()).get_node().name == NODE


def test_an_explicit_api_server_overrides_and_never_goes_through_a_proxy(server: FakeApiServer) -> None:
    with make_api_client(kubeconfig=None, api_server=server.url + "/") as client:
        assert isinstance(client, ApiClient)
        assert client.configuration.host == server.url
        assert client.configuration.proxy is None


def test_an_unreadable_kubeconfig_is_a_permanent_error_saying_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(PermanentError, match=r"kubeconfig .*missing.*--kubeconfig"):
        make_api_client(kubeconfig=str(tmp_path / "missing"), api_server=None)


def test_an_api_server_that_is_not_a_url_is_refused() -> None:
    with pytest.raises(PermanentError, match="must be an http"):
        make_api_client(kubeconfig=None, api_server="127.0.0.1:6443")


def test_an_unreachable_api_server_is_a_transient_error() -> None:
    with make_api_client(kubeconfig=None, api_server="http://127.0.0.1:9") as client:
        api = KubeApi(client, node_name=NODE, clock=FakeClock())
        with pytest.raises(TransientError, match="cannot reach the API server"):
            api.get_node()


def test_without_kubeconfig_or_server_outside_a_pod_the_error_says_what_to_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(PermanentError, match=r"in-cluster service account.*--api-server"):
        make_api_client(kubeconfig=None, api_server=None)
