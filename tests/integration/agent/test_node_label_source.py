"""The label source against the fake API server: prompt delivery, re-list on 410 and on dropped streams."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from migagent.clock import SystemClock
from migagent.kube.adapter import KubeApi
from migagent.kube.client import make_api_client
from migagent.sources.node_label import NodeLabelSource, WatchSettings
from migagent_sim.apiserver import FakeApiServer
from tests.integration.agent.support import eventually

NODE = "gpu-node-1"
FAST = WatchSettings(resync_period_s=3600.0, watch_timeout_s=30.0, backoff_initial_s=0.01, backoff_max_s=0.1)


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer(bookmark_interval_s=0.2) as fake:
        fake.add_node(NODE, labels={"nvidia.com/mig.config": "all-1g.10gb"})
        yield fake


@pytest.fixture
def source(server: FakeApiServer) -> Iterator[NodeLabelSource]:
    api = KubeApi(make_api_client(kubeconfig=None, api_server=server.url), node_name=NODE, clock=SystemClock())
    watching = NodeLabelSource(api, clock=SystemClock(), settings=FAST)
    watching.start()
    yield watching
    watching.stop(join_timeout_s=0.5)


def _label(server: FakeApiServer, value: str | None) -> None:
    def edit(node: dict[str, dict[str, dict[str, str]]]) -> None:
        labels = node["metadata"].setdefault("labels", {})
        if value is None:
            labels.pop("nvidia.com/mig.config", None)
        else:
            labels["nvidia.com/mig.config"] = value

    server.update_node(NODE, edit)


def _next_change(source: NodeLabelSource) -> str | None:
    wake = source.wait(threading.Event(), timeout_s=10.0)
    assert wake.label_changed, "no label change delivered"
    return source.desired


def test_the_first_list_and_each_label_change_are_delivered(server: FakeApiServer, source: NodeLabelSource) -> None:
    assert _next_change(source) == "all-1g.10gb"
    _label(server, "all-balanced")
    assert _next_change(source) == "all-balanced"
    _label(server, None)
    assert _next_change(source) is None


def test_changes_to_other_fields_do_not_wake_the_agent(server: FakeApiServer, source: NodeLabelSource) -> None:
    _next_change(source)
    server.update_node(NODE, lambda node: node["metadata"]["labels"].update({"unrelated": "x"}))
    assert not source.wait(threading.Event(), timeout_s=0.3).due


def test_an_expired_resource_version_leads_to_a_fresh_list(server: FakeApiServer, source: NodeLabelSource) -> None:
    _next_change(source)
    lists = source.relists
    server.compact()
    _label(server, "all-balanced")
    eventually(lambda: source.desired == "all-balanced", what="the label after a compaction")
    server.compact()
    eventually(lambda: server.drop_watches() > 0, what="an open watch")
    _label(server, "all-7g")
    eventually(lambda: source.desired == "all-7g", what="the label after a compaction and a dropped stream")
    assert source.relists > lists


def test_a_label_set_while_the_stream_was_down_is_found_by_the_relist(
    server: FakeApiServer, source: NodeLabelSource
) -> None:
    _next_change(source)
    server.inject_fault("GET", "/api/v1/nodes", 500, times=3)
    eventually(lambda: server.drop_watches() > 0, what="an open watch")
    _label(server, "all-balanced")
    eventually(lambda: source.desired == "all-balanced", what="the label changed during the outage")


def test_wait_returns_on_the_resync_tick_and_on_stop(server: FakeApiServer) -> None:
    api = KubeApi(make_api_client(kubeconfig=None, api_server=server.url), node_name=NODE, clock=SystemClock())
    ticking = NodeLabelSource(api, clock=SystemClock(), settings=WatchSettings(resync_period_s=0.1))
    assert ticking.wait(threading.Event(), timeout_s=5.0).resync
    stop = threading.Event()
    stop.set()
    assert not ticking.wait(stop, timeout_s=5.0).due
