"""Where a real API server is less kind than a naive fake: no-op writes, PDB budgets consumed by evictions."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from migagent_sim.apiserver import FakeApiServer
from tests.integration.kube_apiserver.conftest import NODE
from tests.waiting import eventually


def evict(core: client.CoreV1Api, namespace: str, name: str) -> None:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
    core.create_namespaced_pod_eviction(name, namespace, body)


def test_a_patch_that_changes_nothing_keeps_the_resource_version_and_sends_no_watch_event(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    before = server.node(NODE)["metadata"]["resourceVersion"]
    same = {"metadata": {"labels": {"nvidia.com/mig.config": "all-disabled"}}}

    answered = core.patch_node(NODE, same).to_dict(serialize=True)

    assert answered["metadata"]["resourceVersion"] == before
    assert server.resource_version() == before
    core.patch_node(NODE, {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.10gb"}}})
    assert int(server.node(NODE)["metadata"]["resourceVersion"]) > int(before)


def test_a_patch_stating_a_stale_resource_version_is_409_conflict(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    stale = server.node(NODE)["metadata"]["resourceVersion"]
    core.patch_node(NODE, {"metadata": {"labels": {"a": "1"}}})

    with pytest.raises(ApiException) as raised:
        core.patch_node(NODE, {"metadata": {"resourceVersion": stale, "labels": {"a": "2"}}})

    assert raised.value.status == 409
    assert server.node(NODE)["metadata"]["labels"]["a"] == "1"


def _replicas(server: FakeApiServer, count: int) -> None:
    for index in range(count):
        server.create_pod(
            node_name=NODE, namespace="ml", name=f"web-{index}", labels={"app": "web"}, owner_kind="ReplicaSet"
        )


def test_evictions_consume_the_budget_so_a_second_one_under_one_pdb_is_429(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    _replicas(server, 3)
    server.add_pdb("ml", "web", match_labels={"app": "web"}, disruptions_allowed=1)

    evict(core, "ml", "web-0")
    with pytest.raises(ApiException) as raised:
        evict(core, "ml", "web-1")

    assert raised.value.status == 429
    status = server.requests[-1]
    assert status.status == 429
    budget = client.PolicyV1Api(core.api_client).read_namespaced_pod_disruption_budget("web", "ml")
    status = budget.to_dict(serialize=True)["status"]
    assert status["disruptionsAllowed"] == 0
    assert "web-0" in status["disruptedPods"]


def test_a_managed_pdb_gets_its_disruption_back_when_a_replacement_is_ready(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    _replicas(server, 3)
    budget = server.add_managed_pdb("ml", "web", match_labels={"app": "web"}, min_available=2)
    assert budget["status"]["disruptionsAllowed"] == 1

    evict(core, "ml", "web-0")
    with pytest.raises(ApiException) as raised:
        evict(core, "ml", "web-1")
    assert raised.value.status == 429

    eventually(lambda: server.pod("ml", "web-0") is None, what="web-0 to finish terminating")
    server.create_pod(node_name=NODE, namespace="ml", name="web-3", labels={"app": "web"}, owner_kind="ReplicaSet")
    eventually(lambda: server.pdb("ml", "web")["status"]["disruptionsAllowed"] == 1, what="the budget to recover")
    evict(core, "ml", "web-1")


def test_a_managed_pdb_with_max_unavailable_counts_the_owners_replicas(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    _replicas(server, 3)
    server.add_managed_pdb("ml", "web", match_labels={"app": "web"}, max_unavailable=1, replicas=3)

    evict(core, "ml", "web-0")

    status = server.pdb("ml", "web")["status"]
    assert (status["currentHealthy"], status["desiredHealthy"], status["disruptionsAllowed"]) == (2, 2, 0)
