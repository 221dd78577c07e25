"""KubeApi against the fake apiserver: labels, annotations, cordon flag, the condition, events, faults."""

from __future__ import annotations

import pytest
from kubernetes.client import ApiClient

from migagent.errors import PermanentError, TransientError
from migagent.kube.adapter import KubeApi
from migagent_sim.apiserver import FakeApiServer

from .conftest import NODE, HookedClock


def test_labels_are_set_and_a_none_value_deletes_the_label(api: KubeApi, server: FakeApiServer) -> None:
    view = api.patch_metadata(labels={"nvidia.com/mig.config.state": "pending", "nvidia.com/mig.config": None})
    stored = server.node(NODE)["metadata"]["labels"]
    assert stored["nvidia.com/mig.config.state"] == "pending"
    assert "nvidia.com/mig.config" not in stored
    assert stored["kubernetes.io/hostname"] == NODE  # other labels untouched
    assert view.labels == stored


def test_label_writes_are_strategic_merge_patches_of_the_node(api: KubeApi, server: FakeApiServer) -> None:
    server.clear_requests()
    api.patch_metadata(labels={"a": "1"})
    writes = [r for r in server.requests if r.verb == "patch"]
    assert [(w.resource, w.subresource, w.name) for w in writes] == [("nodes", None, NODE)]


def test_annotations_and_labels_can_be_written_in_one_patch_and_deleted(api: KubeApi, server: FakeApiServer) -> None:
    api.patch_metadata(labels={"x": "1"}, annotations={"migagent.io/last-error": "boom", "migagent.io/attempt": "2"})
    api.patch_metadata(annotations={"migagent.io/last-error": None})
    metadata = server.node(NODE)["metadata"]
    assert metadata["labels"]["x"] == "1"
    assert metadata["annotations"] == {"migagent.io/attempt": "2"}


def test_condition_transition_time_moves_only_when_the_status_flips(
    api: KubeApi, server: FakeApiServer, clock: HookedClock
) -> None:
    first = api.set_condition("MigConfigReady", "False", "Reconfiguring", "applying all-1g.5gb")
    clock.advance(120)
    second = api.set_condition("MigConfigReady", "False", "Draining", "evicting 2 pods")
    clock.advance(120)
    third = api.set_condition("MigConfigReady", "True", "Applied", "all-1g.5gb applied")
    a, b, c = (view.condition("MigConfigReady") for view in (first, second, third))
    assert a is not None
    assert b is not None
    assert c is not None
    assert (b.reason, b.message) == ("Draining", "evicting 2 pods")
    assert b.last_transition_time == a.last_transition_time
    assert c.last_transition_time != b.last_transition_time
    assert (c.status, c.reason) == ("True", "Applied")
    kinds = [cond["type"] for cond in server.node(NODE)["status"]["conditions"]]
    assert kinds == ["Ready", "MigConfigReady"]  # the kubelet's condition is left alone


def test_condition_is_written_through_the_status_subresource_and_not_rewritten_when_unchanged(
    api: KubeApi, server: FakeApiServer
) -> None:
    server.clear_requests()
    api.set_condition("MigConfigReady", "True", "Applied", "done")
    api.set_condition("MigConfigReady", "True", "Applied", "done")
    writes = [(r.resource, r.subresource) for r in server.requests if r.verb == "patch"]
    assert writes == [("nodes", "status")]


def test_events_are_recorded_on_the_node_in_the_default_namespace(api: KubeApi, server: FakeApiServer) -> None:
    api.emit_event("MigReconfiguring", "applying all-1g.5gb", warning=False)
    api.emit_event("MigConfigFailed", "it broke", warning=True)
    events = server.events()
    assert [(e["reason"], e["type"]) for e in events] == [
        ("MigReconfiguring", "Normal"),
        ("MigConfigFailed", "Warning"),
    ]
    node_uid = server.node(NODE)["metadata"]["uid"]
    for event in events:
        assert event["metadata"]["namespace"] == "default"
        assert event["involvedObject"]["kind"] == "Node"
        assert event["involvedObject"]["name"] == NODE
        assert event["involvedObject"]["uid"] == node_uid
        assert event["source"]["component"] == "migagent"
    assert events[0]["metadata"]["name"] != events[1]["metadata"]["name"]


def test_cordon_flag_and_its_annotation_are_written_together(api: KubeApi, server: FakeApiServer) -> None:
    server.clear_requests()
    api.set_unschedulable(True, annotations={"migagent.io/cordoned-by-migagent": "true"})
    node = server.node(NODE)
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"]["migagent.io/cordoned-by-migagent"] == "true"
    assert len([r for r in server.requests if r.verb == "patch"]) == 1


@pytest.mark.parametrize("status", [409, 500, 503])
def test_an_injected_fault_on_a_label_patch_is_retried(
    api: KubeApi, server: FakeApiServer, clock: HookedClock, status: int
) -> None:
    server.inject_fault("PATCH", rf"/api/v1/nodes/{NODE}$", status, times=2)
    api.patch_metadata(labels={"nvidia.com/mig.config.state": "success"})
    assert server.node(NODE)["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"
    assert len(clock.sleeps) == 2


def test_a_conflict_on_the_condition_write_re_reads_and_re_applies(api: KubeApi, server: FakeApiServer) -> None:
    server.inject_fault("PATCH", rf"/api/v1/nodes/{NODE}/status$", 409)
    server.clear_requests()
    api.set_condition("MigConfigReady", "False", "Reconfiguring", "x")
    reads = [r for r in server.requests if r.verb == "get" and r.resource == "nodes"]
    assert len(reads) == 2
    assert server.node(NODE)["status"]["conditions"][-1]["reason"] == "Reconfiguring"


def test_faults_on_reads_and_event_creation_are_retried(api: KubeApi, server: FakeApiServer) -> None:
    server.inject_fault("GET", rf"/api/v1/nodes/{NODE}$", 500)
    server.inject_fault("POST", r"/namespaces/default/events$", 429)
    assert api.get_node().name == NODE
    api.emit_event("MigConfigApplied", "ok", warning=False)
    assert len(server.events()) == 1


def test_a_fault_that_outlasts_the_retries_surfaces_as_a_transient_error_naming_the_call(
    api: KubeApi, server: FakeApiServer
) -> None:
    server.inject_fault("PATCH", rf"/api/v1/nodes/{NODE}$", 503, times=10)
    with pytest.raises(TransientError, match=r"patch labels/annotations on node gpu-node-1: HTTP 503"):
        api.patch_metadata(labels={"a": "b"})


def test_forbidden_is_permanent_and_not_retried(api: KubeApi, server: FakeApiServer, clock: HookedClock) -> None:
    server.inject_fault("PATCH", rf"/api/v1/nodes/{NODE}$", 403)
    with pytest.raises(PermanentError, match="HTTP 403"):
        api.patch_metadata(labels={"a": "b"})
    assert clock.sleeps == []


def test_a_missing_node_is_a_permanent_error_naming_it(api_client: ApiClient) -> None:
    missing = KubeApi(api_client, node_name="no-such-node", clock=HookedClock())
    with pytest.raises(PermanentError, match="get node no-such-node: HTTP 404"):
        missing.get_node()
