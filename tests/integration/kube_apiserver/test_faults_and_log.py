"""Injected failures and the request log (RBAC verb, resource, subresource per request)."""

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException, ConflictException, ServiceException

from migagent_sim.apiserver import FakeApiServer
from tests.integration.kube_apiserver.conftest import NODE
from tests.integration.kube_apiserver.support import parsed, status_body, watch_events


def test_an_injected_500_fails_the_matching_request_once_then_normal_service_resumes(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.inject_fault("GET", rf"^/api/v1/nodes/{NODE}$", 500)

    with pytest.raises(ServiceException) as raised:
        core.read_node(NODE)

    body = status_body(raised.value)
    assert (body["kind"], body["status"], body["reason"], body["code"]) == ("Status", "Failure", "InternalError", 500)
    assert parsed(core.read_node(NODE)).metadata.name == NODE


def test_an_injected_409_on_patch_reads_as_a_conflict_and_changes_nothing(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.inject_fault("PATCH", r"/nodes/", 409, times=2)

    for _ in range(2):
        with pytest.raises(ConflictException) as raised:
            core.patch_node(NODE, {"metadata": {"labels": {"a": "1"}}})
        assert status_body(raised.value)["reason"] == "Conflict"
    assert "a" not in server.node(NODE)["metadata"]["labels"]
    assert parsed(core.patch_node(NODE, {"metadata": {"labels": {"a": "1"}}})).metadata.labels["a"] == "1"


@pytest.mark.parametrize(
    ("status", "reason"), [(410, "Expired"), (429, "TooManyRequests"), (503, "ServiceUnavailable")]
)
def test_injected_faults_carry_the_apiserver_reason_for_their_code(
    server: FakeApiServer, core: client.CoreV1Api, status: int, reason: str
) -> None:
    server.inject_fault("*", r"/api/v1/nodes", status)

    with pytest.raises(ApiException) as raised:
        core.list_node()

    assert raised.value.status == status
    assert status_body(raised.value)["reason"] == reason


def test_an_injected_fault_can_carry_a_chosen_reason(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.inject_fault("GET", r"/nodes/", 403, body_reason="Forbidden")

    with pytest.raises(ApiException) as raised:
        core.read_node(NODE)

    assert raised.value.status == 403
    assert status_body(raised.value)["reason"] == "Forbidden"


def test_the_request_log_names_the_rbac_verb_resource_and_subresource_of_each_call(
    server: FakeApiServer, core: client.CoreV1Api, events_api: client.EventsV1Api
) -> None:
    server.create_pod(node_name=NODE, namespace="ns", name="p")
    server.create_pod(node_name=NODE, namespace="ns", name="q")
    server.clear_requests()

    core.read_node(NODE)
    core.list_node(field_selector=f"metadata.name={NODE}")
    watch_events(core.list_node, field_selector=f"metadata.name={NODE}", timeout_seconds=1)
    core.patch_node(NODE, {"spec": {"unschedulable": True}})
    core.patch_node_status(NODE, {"status": {"conditions": [{"type": "X", "status": "True"}]}})
    core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={NODE}")
    core.read_namespaced_pod("p", "ns")
    core.create_namespaced_pod_eviction("p", "ns", client.V1Eviction(metadata=client.V1ObjectMeta(name="p")))
    core.delete_namespaced_pod("q", "ns")

    logged = [(r.verb, r.resource, r.subresource, r.namespace, r.name, r.status) for r in server.requests]
    assert logged == [
        ("get", "nodes", None, None, NODE, 200),
        ("list", "nodes", None, None, None, 200),
        ("watch", "nodes", None, None, None, 200),
        ("patch", "nodes", None, None, NODE, 200),
        ("patch", "nodes", "status", None, NODE, 200),
        ("list", "pods", None, None, None, 200),
        ("get", "pods", None, "ns", "p", 200),
        ("create", "pods", "eviction", "ns", "p", 201),
        ("delete", "pods", None, "ns", "q", 200),
    ]
    assert server.requests[1].query == {"fieldSelector": f"metadata.name={NODE}"}


def test_an_unknown_path_is_a_404_status_and_is_logged(server: FakeApiServer, core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core.read_namespace("default")

    assert raised.value.status == 404
    assert server.requests[-1].status == 404
