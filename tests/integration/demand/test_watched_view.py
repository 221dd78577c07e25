"""The autopilot's view of the pool from watches (DemandApi.watch): one list of each kind, then their events,
on the simulator's API server; whatever changes shows in the next look, and no look lists again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from migagent.clock import SystemClock
from migagent.kube.client import make_api_client
from migagent.kube.demand_api import DemandApi
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
