"""Scoped drain through the fake apiserver: which pods go, PDBs honoured, DaemonSet/mirror pods kept."""

from __future__ import annotations

from typing import Any

import pytest

from migagent.attempt.drain.drainer import Drainer
from migagent.attempt.drain.scope import disturbed_pods, evictable
from migagent.errors import DrainBlockedError
from migagent.kube.adapter import KubeApi
from migagent.layout.observed import Observation
from migagent.node.port import PodView
from migagent_sim.apiserver import FakeApiServer
from migagent_sim.doubles.builders import Holding, gpu_plan, mig_gpu, plan

from .conftest import NODE, HookedClock

GPU0 = mig_gpu(0, [("3g.20gb", 0), ("2g.10gb", 4), ("1g.5gb", 6)])
OBSERVATION = Observation(gpus=(GPU0,))
THREE_G, TWO_G, ONE_G = GPU0.gpu_instances


def _uuid(gi_index: int) -> str:
    return GPU0.gpu_instances[gi_index].compute_instances[0].uuid


def _workload(server: FakeApiServer, name: str, *, resource: str = "nvidia.com/mig-1g.5gb", **kw: object) -> None:
    server.create_pod(
        node_name=NODE,
        namespace="team",
        name=name,
        labels={"app": name},
        resources={resource: 1},
        **kw,  # type: ignore[arg-type]
    )


def _evicted(server: FakeApiServer) -> list[str]:
    return sorted(r.name or "" for r in server.requests if r.subresource == "eviction")


@pytest.fixture
def populated(server: FakeApiServer) -> FakeApiServer:
    _workload(server, "on-3g", owner_kind="ReplicaSet")
    _workload(server, "on-2g", owner_kind="ReplicaSet")
    _workload(server, "on-1g", owner_kind="ReplicaSet")
    _workload(server, "no-devices", owner_kind="ReplicaSet")
    _workload(server, "plugin", owner_kind="DaemonSet", resource="nvidia.com/gpu")
    _workload(server, "static", mirror=True, resource="nvidia.com/gpu")
    server.create_pod(node_name=NODE, namespace="team", name="web", labels={"app": "web"}, owner_kind="ReplicaSet")
    server.create_pod(node_name="other-node", namespace="team", name="elsewhere", resources={"nvidia.com/gpu": 1})
    return server


HOLDINGS = [
    Holding("team", "on-3g", "nvidia.com/mig-3g.20gb", (_uuid(0),)),
    Holding("team", "on-2g", "nvidia.com/mig-2g.10gb", (_uuid(1),)),
    Holding("team", "on-1g", "nvidia.com/mig-1g.5gb", (_uuid(2),)),
    Holding("gpu-operator", "plugin", "nvidia.com/gpu", (_uuid(2),)),
]


def test_only_pods_on_destroyed_instances_and_pods_with_unknown_devices_are_evicted(
    api: KubeApi, populated: FakeApiServer, clock: HookedClock
) -> None:
    pods = api.list_pods_on_node()
    assert "elsewhere" not in {p.ref.name for p in pods}
    chosen = _to_evict(
        plan(gpu_plan(0, keep=[THREE_G], destroy=[TWO_G])), OBSERVATION, HOLDINGS, pods
    )
    assert [p.ref.name for p in chosen] == ["no-devices", "on-2g"]
    result = Drainer(api, clock=clock).drain(chosen, timeout_s=60)
    assert sorted(r.name for r in result.removed) == ["no-devices", "on-2g"]
    assert _evicted(populated) == ["no-devices", "on-2g"]
    remaining = {p["metadata"]["name"] for p in populated.pods(NODE)}
    assert remaining == {"on-3g", "on-1g", "plugin", "static", "web"}


def test_daemonset_and_mirror_pods_are_skipped_even_when_handed_to_the_drainer(
    api: KubeApi, populated: FakeApiServer, clock: HookedClock
) -> None:
    pods = [p for p in api.list_pods_on_node() if p.ref.name in ("plugin", "static")]
    assert len(pods) == 2
    assert Drainer(api, clock=clock).drain(pods, timeout_s=10).removed == ()
    assert _evicted(populated) == []


def test_an_eviction_refused_by_a_pdb_waits_and_succeeds_once_the_pdb_is_relaxed(
    api: KubeApi, populated: FakeApiServer, clock: HookedClock, logs: list[dict[str, object]]
) -> None:
    populated.add_pdb("team", "on-2g-budget", match_labels={"app": "on-2g"}, disruptions_allowed=0)
    clock.at(7.0, lambda: populated.set_pdb_disruptions_allowed("team", "on-2g-budget", 1))
    chosen = [p for p in api.list_pods_on_node() if p.ref.name == "on-2g"]
    result = Drainer(api, clock=clock).drain(chosen, timeout_s=300)
    assert [r.name for r in result.removed] == ["on-2g"]
    assert len(_evicted(populated)) > 1  # refused at least once before it went through
    assert populated.pod("team", "on-2g") is None
    blocked = [entry for entry in logs if entry["event"] == "eviction_blocked"]
    assert blocked
    assert "disruption budget" in str(blocked[0]["reason"])


def test_a_drain_blocked_past_its_timeout_names_the_pod_and_its_pdb(
    api: KubeApi, populated: FakeApiServer, clock: HookedClock
) -> None:
    populated.add_pdb("team", "strict", match_labels={"app": "on-1g"}, disruptions_allowed=0)
    chosen = [p for p in api.list_pods_on_node() if p.ref.name in ("on-1g", "on-2g")]
    with pytest.raises(DrainBlockedError, match=r"team/on-1g \(PodDisruptionBudget: strict\)") as info:
        Drainer(api, clock=clock).drain(chosen, timeout_s=30)
    assert info.value.pods == ("team/on-1g",)
    assert "The disruption budget strict needs" in str(info.value)
    assert populated.pod("team", "on-2g") is None  # the unblocked pod still left
    assert populated.pod("team", "on-1g") is not None


def test_the_drain_needs_no_pod_get_and_no_pdb_access_only_pod_lists_and_evictions(
    api: KubeApi, populated: FakeApiServer, clock: HookedClock
) -> None:
    populated.add_pdb("team", "strict", match_labels={"app": "on-1g"}, disruptions_allowed=0)
    chosen = [p for p in api.list_pods_on_node() if p.ref.name in ("on-1g", "on-2g")]
    with pytest.raises(DrainBlockedError, match="strict"):
        Drainer(api, clock=clock).drain(chosen, timeout_s=30)
    made = {(r.verb, r.api_group, r.resource, r.subresource) for r in populated.requests}
    assert made == {("list", "", "pods", None), ("create", "", "pods", "eviction")}
    selectors = [r.query.get("fieldSelector", "") for r in populated.requests if r.verb == "list"]
    # waiting for the evicted pod to go: lists of the node's pods, never a lookup per pod
    assert selectors
    assert all(s.startswith("spec.nodeName=") for s in selectors)


def test_a_refused_eviction_whose_429_names_no_budget_is_still_blamed_on_a_pdb(
    api: KubeApi, populated: FakeApiServer, clock: HookedClock
) -> None:
    populated.inject_fault("POST", r"/pods/on-1g/eviction$", 429, times=1000)
    chosen = [p for p in api.list_pods_on_node() if p.ref.name == "on-1g"]
    with pytest.raises(DrainBlockedError, match=r"team/on-1g \(a PodDisruptionBudget\): Too many requests"):
        Drainer(api, clock=clock).drain(chosen, timeout_s=30)


def test_force_delete_removes_pods_without_the_eviction_api(
    api: KubeApi, populated: FakeApiServer, clock: HookedClock
) -> None:
    populated.add_pdb("team", "strict", match_labels={"app": "on-1g"}, disruptions_allowed=0)
    chosen = [p for p in api.list_pods_on_node() if p.ref.name == "on-1g"]
    Drainer(api, clock=clock).drain(chosen, timeout_s=30, force_delete=True)
    assert populated.pod("team", "on-1g") is None
    assert _evicted(populated) == []
    assert [r.name for r in populated.requests if r.verb == "delete"] == ["on-1g"]


def test_an_injected_server_error_during_eviction_is_retried(
    api: KubeApi, populated: FakeApiServer, clock: HookedClock
) -> None:
    populated.inject_fault("POST", r"/pods/on-3g/eviction$", 500, times=2)
    chosen = [p for p in api.list_pods_on_node() if p.ref.name == "on-3g"]
    assert [r.name for r in Drainer(api, clock=clock).drain(chosen, timeout_s=60).removed] == ["on-3g"]
    assert len(_evicted(populated)) == 3


def test_a_pod_that_vanished_before_its_eviction_counts_as_drained(
    api: KubeApi, populated: FakeApiServer, clock: HookedClock
) -> None:
    chosen = [p for p in api.list_pods_on_node() if p.ref.name == "on-3g"]
    populated.delete_pod("team", "on-3g")
    assert [r.name for r in Drainer(api, clock=clock).drain(chosen, timeout_s=10).removed] == ["on-3g"]


def test_pods_can_be_listed_by_namespace_and_label_and_read_back(api: KubeApi, populated: FakeApiServer) -> None:
    found = api.list_pods_on_node(namespace="team", label_selector="app=on-1g")
    assert [p.ref.name for p in found] == ["on-1g"]
    assert found[0].gpu_resources == frozenset({"nvidia.com/mig-1g.5gb"})
    assert api.read_pod(found[0].ref) == found[0]
    populated.delete_pod("team", "on-1g")
    assert api.read_pod(found[0].ref) is None


def _replace_with_same_name(server: FakeApiServer, name: str) -> str:
    """A StatefulSet-style successor: same namespace/name, new uid, not on this node yet."""
    server.delete_pod("team", name)
    successor = server.create_pod(node_name=None, namespace="team", name=name, labels={"app": name})
    return str(successor["metadata"]["uid"])


def test_a_pod_replaced_by_a_same_named_successor_counts_as_drained_and_the_successor_is_left_alone(
    api: KubeApi, populated: FakeApiServer, clock: HookedClock
) -> None:
    chosen = [p for p in api.list_pods_on_node() if p.ref.name == "on-2g"]
    successor_uid = _replace_with_same_name(populated, "on-2g")
    result = Drainer(api, clock=clock).drain(chosen, timeout_s=30)
    assert [r.name for r in result.removed] == ["on-2g"]
    survivor = populated.pod("team", "on-2g")
    assert survivor is not None
    assert survivor["metadata"]["uid"] == successor_uid
    assert clock.elapsed < 30, "the drain did not wait for its timeout"


def test_force_delete_of_a_replaced_pod_leaves_the_successor_alone(
    api: KubeApi, populated: FakeApiServer, clock: HookedClock
) -> None:
    chosen = [p for p in api.list_pods_on_node() if p.ref.name == "on-1g"]
    successor_uid = _replace_with_same_name(populated, "on-1g")
    Drainer(api, clock=clock).drain(chosen, timeout_s=30, force_delete=True)
    survivor = populated.pod("team", "on-1g")
    assert survivor is not None
    assert survivor["metadata"]["uid"] == successor_uid


def _to_evict(*args: Any) -> list[PodView]:
    """The pods the drain moves: those a plan disturbs that may be evicted."""
    return [pod for pod in disturbed_pods(*args) if evictable(pod)]
