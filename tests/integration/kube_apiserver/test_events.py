"""Event creation through CoreV1Api and EventsV1Api, with the apiserver's create-time checks."""

import datetime

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from migagent_sim.apiserver import FakeApiServer
from tests.integration.kube_apiserver.conftest import NODE
from tests.integration.kube_apiserver.support import parsed, status_body

# MicroTime needs a fractional part; a non-zero microsecond keeps isoformat() from dropping it.
EVENT_TIME = datetime.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=datetime.UTC)


def _node_reference(server: FakeApiServer) -> client.V1ObjectReference:
    return client.V1ObjectReference(kind="Node", name=NODE, uid=server.node(NODE)["metadata"]["uid"], api_version="v1")


def test_a_core_event_about_the_node_is_stored_with_generated_name_uid_and_version(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name=f"{NODE}."),
        involved_object=_node_reference(server),
        reason="MigConfigApplied",
        message="applied all-1g.10gb",
        type="Normal",
        source=client.V1EventSource(component="migagent", host=NODE),
    )

    created = parsed(core.create_namespaced_event("default", event))

    assert created.metadata.name.startswith(f"{NODE}.")
    assert len(created.metadata.name) == len(NODE) + 6
    assert created.metadata.uid
    assert created.metadata.resource_version.isdigit()
    assert created.metadata.creation_timestamp is not None
    assert [(e["reason"], e["involvedObject"]["kind"]) for e in server.events()] == [("MigConfigApplied", "Node")]
    assert server.requests[-1].verb == "create"
    assert server.requests[-1].resource == "events"


def test_a_core_event_about_a_cluster_object_outside_default_is_422(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="x"), involved_object=_node_reference(server), reason="R", type="Normal"
    )

    with pytest.raises(ApiException) as raised:
        core.create_namespaced_event("gpu-operator", event)

    assert raised.value.status == 422
    assert "involvedObject.namespace" in status_body(raised.value)["message"]


def test_an_events_v1_event_is_stored_and_returned(server: FakeApiServer, events_api: client.EventsV1Api) -> None:
    event = client.EventsV1Event(
        metadata=client.V1ObjectMeta(generate_name=f"{NODE}."),
        event_time=EVENT_TIME,
        regarding=_node_reference(server),
        reporting_controller="migagent.io/agent",
        reporting_instance=f"migagent-{NODE}",
        action="Reconfigure",
        reason="Reconfiguring",
        note="destroying 2 GPU instances",
        type="Normal",
    )

    created = parsed(events_api.create_namespaced_event("default", event))

    assert created.reason == "Reconfiguring"
    assert created.event_time == EVENT_TIME
    assert server.events()[-1]["apiVersion"] == "events.k8s.io/v1"
    assert server.requests[-1].api_group == "events.k8s.io"


def test_an_events_v1_event_without_reporting_fields_is_422_naming_them(
    server: FakeApiServer, events_api: client.EventsV1Api
) -> None:
    event = client.EventsV1Event(
        metadata=client.V1ObjectMeta(name="incomplete"), event_time=EVENT_TIME, reason="R", type="Normal"
    )

    with pytest.raises(ApiException) as raised:
        events_api.create_namespaced_event("default", event)

    message = status_body(raised.value)["message"]
    assert raised.value.status == 422
    assert "reportingController: Required value" in message
    assert "action: Required value" in message
    assert server.events() == []
