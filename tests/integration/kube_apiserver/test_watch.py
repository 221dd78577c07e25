"""Node watches through `kubernetes.watch.Watch`: chunked events, selectors, bookmarks, 410, dropped streams."""

import threading

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from migagent_sim.apiserver import FakeApiServer
from tests.integration.kube_apiserver.conftest import NODE
from tests.integration.kube_apiserver.support import new_watch, parsed, watch_events, watch_stream

BY_NAME = f"metadata.name={NODE}"


def test_watch_from_the_list_version_sees_modified_after_a_label_patch(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    listed = parsed(core.list_node(field_selector=BY_NAME))
    server.add_node("unwatched-node")
    core.patch_node(NODE, {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.10gb"}}})

    events = watch_events(
        core.list_node, field_selector=BY_NAME, resource_version=listed.metadata.resource_version, timeout_seconds=1
    )

    assert [(e["type"], e["object"].metadata.name) for e in events] == [("MODIFIED", NODE)]
    assert events[0]["object"].metadata.labels["nvidia.com/mig.config"] == "all-1g.10gb"


def test_watch_sees_a_change_made_while_the_stream_is_open(server: FakeApiServer, core: client.CoreV1Api) -> None:
    version = parsed(core.list_node(field_selector=BY_NAME)).metadata.resource_version
    stream = watch_stream(core.list_node, field_selector=BY_NAME, resource_version=version, timeout_seconds=5)
    patcher = threading.Timer(0.2, lambda: core.patch_node(NODE, {"spec": {"unschedulable": True}}))
    patcher.start()

    first = next(stream)
    patcher.join()
    stream.close()

    assert first["type"] == "MODIFIED"
    assert first["object"].spec.unschedulable is True


def test_watch_without_a_resource_version_starts_with_added_for_existing_objects(core: client.CoreV1Api) -> None:
    events = watch_events(core.list_node, field_selector=BY_NAME, timeout_seconds=1)

    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", NODE)]


def test_a_node_that_stops_matching_the_label_selector_is_reported_deleted(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    version = server.resource_version()
    core.patch_node(NODE, {"metadata": {"labels": {"nvidia.com/mig.config": None}}})

    events = watch_events(
        core.list_node, label_selector="nvidia.com/mig.config", resource_version=version, timeout_seconds=1
    )

    assert [e["type"] for e in events] == ["DELETED"]


def test_bookmarks_arrive_when_allowed_and_advance_the_watch_resource_version(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    version = server.resource_version()
    server.add_node("other-node")
    watcher = new_watch()

    events = list(
        watcher.stream(
            core.list_node,
            field_selector=BY_NAME,
            resource_version=version,
            timeout_seconds=1,
            allow_watch_bookmarks=True,
        )
    )

    assert events
    assert {e["type"] for e in events} == {"BOOKMARK"}
    assert events[-1]["raw_object"]["metadata"]["resourceVersion"] == server.resource_version()
    assert watcher.resource_version == server.resource_version()


def test_no_bookmarks_arrive_unless_asked_for(server: FakeApiServer, core: client.CoreV1Api) -> None:
    events = watch_events(
        core.list_node, field_selector=BY_NAME, resource_version=server.resource_version(), timeout_seconds=1
    )

    assert events == []


def test_watching_from_a_compacted_version_raises_api_exception_410(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    version = parsed(core.list_node(field_selector=BY_NAME)).metadata.resource_version
    core.patch_node(NODE, {"metadata": {"labels": {"a": "1"}}})
    server.compact()

    with pytest.raises(ApiException) as raised:
        watch_events(core.list_node, field_selector=BY_NAME, resource_version=version, timeout_seconds=1)

    assert raised.value.status == 410
    assert raised.value.reason.startswith("Expired: too old resource version")


def test_a_compacted_watch_is_an_error_event_over_http_200(server: FakeApiServer, core: client.CoreV1Api) -> None:
    version = server.resource_version()
    core.patch_node(NODE, {"metadata": {"labels": {"a": "1"}}})
    server.compact()

    response = parsed(core.list_node(resource_version=version, watch=True, timeout_seconds=1, _preload_content=False))
    lines = response.data.decode().splitlines()

    assert response.status == 200
    assert len(lines) == 1
    assert '"type": "ERROR"' in lines[0]
    assert '"code": 410' in lines[0]


def test_watching_from_the_current_version_after_compaction_is_allowed(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    core.patch_node(NODE, {"metadata": {"labels": {"a": "1"}}})
    current = server.compact()

    events = watch_events(core.list_node, field_selector=BY_NAME, resource_version=current, timeout_seconds=1)

    assert events == []


def test_dropping_watches_ends_the_stream_without_the_terminating_chunk(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    stream = watch_stream(core.list_node, field_selector=BY_NAME, timeout_seconds=30)
    assert next(stream)["type"] == "ADDED"

    assert server.drop_watches() == 1
    with pytest.raises(urllib3.exceptions.ProtocolError):
        next(stream)


def test_the_client_can_keep_using_the_api_after_a_watch_times_out(core: client.CoreV1Api) -> None:
    watch_events(core.list_node, field_selector=BY_NAME, timeout_seconds=1)

    assert parsed(core.read_node(NODE)).metadata.name == NODE
