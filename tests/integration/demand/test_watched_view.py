"""The autopilot's view of the pool from watches (DemandApi.watch): one list of each kind, then their events,
on the simulator's API server; whatever changes shows in the next look, and no look lists again."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import CoreV1Api

from migagent.clock import SystemClock
from migagent.kube.client import make_api_client
from migagent.kube.demand_api import DemandApi, _gpu_pod, _Kept
from migagent.node.scheduling import DemandPod
from migagent_sim.apiserver.server import FakeApiServer
from tests.waiting import eventually

SELECTOR = "migagent.io/autopilot=enabled"
GPU = {"nvidia.com/mig-3g.40gb": 1}


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer(bookmark_interval_s=0.2, grace_scale=0) as fake:
        fake.add_node("opted", labels={"migagent.io/autopilot": "enabled"})
        fake.add_node("other")
        fake.create_pod(node_name=None, namespace="ml", name="waiting", owner_kind="ReplicaSet", resources=GPU)
        yield fake


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[DemandApi]:
    api = DemandApi(make_api_client(kubeconfig=None, api_server=server.url), clock=SystemClock())
    api.watch(SELECTOR)
    yield api
    api.close()  # the watches' threads end with it (tests/leftovers.py checks)


def _lists(server: FakeApiServer) -> list[str]:
    return sorted(r.resource for r in server.requests if r.verb == "list")


def test_a_look_reads_what_the_watches_brought_and_never_lists_again(server: FakeApiServer, api: DemandApi) -> None:
    assert [n.name for n in api.list_demand_nodes(SELECTOR)] == ["opted"]
    assert [p.name for p in api.list_gpu_pods()] == ["ml/waiting"]
    assert api.list_pdbs() == []
    server.create_pod(node_name=None, namespace="ml", name="more", owner_kind="ReplicaSet", resources=GPU)
    server.create_pod(node_name=None, namespace="ml", name="cpu-only", owner_kind="ReplicaSet", resources={})
    server.delete_pod("ml", "waiting")
    server.add_pdb("ml", "budget", match_labels={"app": "x"}, disruptions_allowed=1)
    server.update_node("other", lambda node: node["metadata"]["labels"].update({"migagent.io/autopilot": "enabled"}))
    eventually(lambda: [p.name for p in api.list_gpu_pods()] == ["ml/more"], "the pods' watch brings both")
    eventually(lambda: [b.name for b in api.list_pdbs()] == ["budget"], "the budgets' watch brings it")
    eventually(lambda: [n.name for n in api.list_demand_nodes(SELECTOR)] == ["opted", "other"], "a node opted in")
    for _ in range(5):  # looks
        api.list_demand_nodes(SELECTOR), api.list_gpu_pods(), api.list_pdbs()
    assert _lists(server) == ["nodes", "poddisruptionbudgets", "pods"]  # one list each, when it started
    watches = sorted(r.resource for r in server.requests if r.verb == "watch")
    assert watches == ["nodes", "poddisruptionbudgets", "pods"]


def test_other_nodes_than_the_watched_selector_are_listed(server: FakeApiServer, api: DemandApi) -> None:
    assert sorted(n.name for n in api.list_demand_nodes("")) == ["opted", "other"]


def test_a_stop_while_a_watch_is_being_opened_shuts_it_once_it_opens() -> None:
    """The client's Watch.stop shuts the connection it reads; one still being opened it cannot see, and the
    informer's thread then read the new watch for its 300 s: `autopilot run` took five minutes to end once
    it was told to (seen under load, where the opening is slow)."""
    with FakeApiServer(bookmark_interval_s=3600, grace_scale=0) as quiet:  # nothing comes on the watch
        core = CoreV1Api(make_api_client(kubeconfig=None, api_server=quiet.url))
        kept: _Kept[DemandPod] | None = None

        def list_pods(**args: Any) -> Any:
            if args.get("watch") and kept is not None:  # opened once stop() has begun: the window the fix closes
                kept._stopping.wait(60)  # generous: stop() comes at once, and the test waits for it below
            return core.list_pod_for_all_namespaces(**args)

        kept = _Kept(list_pods, "V1Pod", _gpu_pod)
        assert kept.items() == []  # listed: the watch is being opened now
        stopping = threading.Thread(target=kept.stop, name="stop")
        stopping.start()
        try:
            eventually(lambda: not stopping.is_alive(), "stop() returns with the watch quiet")
        finally:
            quiet.drop_watches()  # what ends the watch without the fix, so that the thread ends either way
            stopping.join()


def test_close_ends_watches_that_bring_no_events_without_waiting_for_them() -> None:
    """Open watches that bring nothing (no bookmarks, no changes) end when closed, not at their 300 s."""
    with FakeApiServer(bookmark_interval_s=3600, grace_scale=0) as quiet:
        api = DemandApi(make_api_client(kubeconfig=None, api_server=quiet.url), clock=SystemClock())
        api.watch(SELECTOR)
        eventually(lambda: len([r for r in quiet.requests if r.verb == "watch"]) == 3, "the three watches are open")
        closing = threading.Thread(target=api.close, name="close")
        closing.start()
        try:
            eventually(lambda: not closing.is_alive(), "close() returns with the watches still quiet")
        finally:
            quiet.drop_watches()  # what ends them without the fix, so that the thread ends either way
            closing.join()
