"""Node reads and writes through the real kubernetes client: patch types, node strategy, concurrency."""

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from migagent_sim.apiserver import FakeApiServer
from tests.integration.kube_apiserver.conftest import NODE
from tests.integration.kube_apiserver.support import parsed, status_body

MERGE_PATCH = "application/merge-patch+json"


def test_reading_a_node_gives_string_quantities_and_a_string_resource_version(core: client.CoreV1Api) -> None:
    node = parsed(core.read_node(NODE))

    assert node.metadata.name == NODE
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert node.metadata.resource_version.isdigit()
    assert [c.type for c in node.status.conditions] == ["Ready"]


def test_listing_nodes_by_name_returns_only_that_node_and_the_list_resource_version(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.add_node("other-node")

    listed = parsed(core.list_node(field_selector=f"metadata.name={NODE}"))

    assert [n.metadata.name for n in listed.items] == [NODE]
    assert listed.metadata.resource_version == server.resource_version()


def test_reading_a_missing_node_is_404_with_a_not_found_status(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core.read_node("no-such-node")

    body = status_body(raised.value)
    assert raised.value.status == 404
    assert body["reason"] == "NotFound"
    assert body["message"] == 'nodes "no-such-node" not found'
    assert body["details"] == {"name": "no-such-node", "kind": "nodes"}


def test_strategic_merge_patch_of_labels_adds_and_removes_labels_and_bumps_the_version(
    core: client.CoreV1Api,
) -> None:
    before = parsed(core.read_node(NODE))

    after = parsed(
        core.patch_node(NODE, {"metadata": {"labels": {"migagent.io/x": "1", "nvidia.com/mig.config": None}}})
    )

    assert after.metadata.labels["migagent.io/x"] == "1"
    assert "nvidia.com/mig.config" not in after.metadata.labels
    assert int(after.metadata.resource_version) > int(before.metadata.resource_version)
    assert parsed(core.read_node(NODE)).metadata.labels == after.metadata.labels


def test_merge_patch_of_labels_is_applied_with_the_merge_patch_content_type(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    core.patch_node(
        NODE, {"metadata": {"labels": {"nvidia.com/mig.config.state": "pending"}}}, _content_type=MERGE_PATCH
    )

    assert server.node(NODE)["metadata"]["labels"]["nvidia.com/mig.config.state"] == "pending"
    assert server.requests[-1].verb == "patch"


def test_json_patch_with_a_failing_test_operation_is_422_and_changes_nothing(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    before = server.node(NODE)
    operations = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "999"},
        {"op": "add", "path": "/metadata/labels/migagent.io~1x", "value": "1"},
    ]

    with pytest.raises(ApiException) as raised:
        core.patch_node(NODE, operations)

    assert raised.value.status == 422
    assert server.node(NODE) == before


def test_json_patch_with_a_passing_test_operation_applies(server: FakeApiServer, core: client.CoreV1Api) -> None:
    version = server.node(NODE)["metadata"]["resourceVersion"]
    operations = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "add", "path": "/metadata/labels/migagent.io~1x", "value": "1"},
    ]

    node = parsed(core.patch_node(NODE, operations))

    assert node.metadata.labels["migagent.io/x"] == "1"


def test_status_patch_merges_conditions_by_type_and_keeps_the_kubelets_ready_condition(
    core: client.CoreV1Api,
) -> None:
    condition = {"type": "MigConfigReady", "status": "False", "reason": "Reconfiguring", "message": "applying"}
    core.patch_node_status(NODE, {"status": {"conditions": [condition]}})

    node = parsed(
        core.patch_node_status(NODE, {"status": {"conditions": [{**condition, "status": "True", "reason": "Applied"}]}})
    )

    by_type = {c.type: c for c in node.status.conditions}
    assert set(by_type) == {"Ready", "MigConfigReady"}
    assert by_type["MigConfigReady"].status == "True"
    assert by_type["MigConfigReady"].reason == "Applied"
    assert by_type["Ready"].status == "True"


def test_merge_patch_of_status_conditions_replaces_the_whole_list(core: client.CoreV1Api) -> None:
    condition = {"type": "MigConfigReady", "status": "True", "reason": "Applied", "message": ""}

    node = parsed(core.patch_node_status(NODE, {"status": {"conditions": [condition]}}, _content_type=MERGE_PATCH))

    assert [c.type for c in node.status.conditions] == ["MigConfigReady"]


def test_patching_the_main_resource_drops_status_changes(core: client.CoreV1Api) -> None:
    node = parsed(
        core.patch_node(NODE, {"spec": {"unschedulable": True}, "status": {"allocatable": {"nvidia.com/gpu": "0"}}})
    )

    assert node.spec.unschedulable is True
    assert node.status.allocatable["nvidia.com/gpu"] == "8"


def test_patching_the_status_subresource_drops_spec_changes(core: client.CoreV1Api) -> None:
    node = parsed(
        core.patch_node_status(
            NODE, {"spec": {"unschedulable": True}, "status": {"allocatable": {"nvidia.com/gpu": "4"}}}
        )
    )

    assert not node.spec.unschedulable
    assert node.status.allocatable["nvidia.com/gpu"] == "4"


def test_a_patch_carrying_a_stale_resource_version_is_a_409_conflict(core: client.CoreV1Api) -> None:
    stale = parsed(core.read_node(NODE)).metadata.resource_version
    core.patch_node(NODE, {"metadata": {"labels": {"a": "1"}}})

    with pytest.raises(ApiException) as raised:
        core.patch_node(NODE, {"metadata": {"resourceVersion": stale, "labels": {"a": "2"}}})

    assert raised.value.status == 409
    assert status_body(raised.value)["reason"] == "Conflict"
    assert parsed(core.read_node(NODE)).metadata.labels["a"] == "1"


def test_a_patch_carrying_the_current_resource_version_succeeds(core: client.CoreV1Api) -> None:
    current = parsed(core.read_node(NODE)).metadata.resource_version

    node = parsed(core.patch_node(NODE, {"metadata": {"resourceVersion": current, "labels": {"a": "2"}}}))

    assert node.metadata.labels["a"] == "2"


def test_replacing_a_node_with_a_stale_resource_version_is_a_409_conflict(core: client.CoreV1Api) -> None:
    node = parsed(core.read_node(NODE))
    core.patch_node(NODE, {"metadata": {"labels": {"a": "1"}}})
    node.spec.unschedulable = True

    with pytest.raises(ApiException) as raised:
        core.replace_node(NODE, node)

    assert raised.value.status == 409
    assert not parsed(core.read_node(NODE)).spec.unschedulable


def test_replacing_a_node_with_the_current_resource_version_updates_spec_but_not_status(
    core: client.CoreV1Api,
) -> None:
    node = parsed(core.read_node(NODE))
    node.spec.unschedulable = True
    node.status.allocatable["nvidia.com/gpu"] = "0"

    replaced = parsed(core.replace_node(NODE, node))

    assert replaced.spec.unschedulable is True
    assert replaced.status.allocatable["nvidia.com/gpu"] == "8"
    assert replaced.metadata.uid == node.metadata.uid


def test_strategic_merge_patch_replaces_the_atomic_taints_list_whole(core: client.CoreV1Api) -> None:
    first = {"key": "migagent.io/reconfiguring", "effect": "NoSchedule"}
    second = {"key": "example.com/other", "value": "x", "effect": "NoExecute"}
    core.patch_node(NODE, {"spec": {"taints": [first, second]}})

    node = parsed(core.patch_node(NODE, {"spec": {"taints": [second]}}))

    assert [t.key for t in node.spec.taints] == ["example.com/other"]


def test_concurrent_label_patches_all_land_with_distinct_resource_versions(
    server: FakeApiServer, api_client: client.ApiClient
) -> None:
    versions: list[str] = []
    lock = threading.Lock()

    def patch_labels(worker: int) -> None:
        core = client.CoreV1Api(api_client)
        for round_ in range(5):
            node = parsed(core.patch_node(NODE, {"metadata": {"labels": {f"w{worker}-{round_}": "1"}}}))
            with lock:
                versions.append(node.metadata.resource_version)

    threads = [threading.Thread(target=patch_labels, args=(worker,)) for worker in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    labels = server.node(NODE)["metadata"]["labels"]
    assert all(f"w{worker}-{round_}" in labels for worker in range(6) for round_ in range(5))
    assert len(set(versions)) == 30


def test_an_invalid_label_value_is_rejected_with_422_naming_the_value(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core.patch_node(NODE, {"metadata": {"labels": {"nvidia.com/mig.config": "not valid!"}}})

    assert raised.value.status == 422
    assert "not valid!" in status_body(raised.value)["message"]


def test_a_label_value_that_is_not_a_string_is_a_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core.patch_node(NODE, {"metadata": {"labels": {"count": 3}}})

    assert raised.value.status == 400


def test_update_node_through_the_state_api_bumps_the_version_and_notifies_listeners(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    seen: list[str] = []
    server.on_node_changed(lambda node: seen.append(node["status"]["allocatable"]["nvidia.com/gpu"]))
    before = parsed(core.read_node(NODE)).metadata.resource_version

    server.update_node(NODE, lambda node: node["status"]["allocatable"].update({"nvidia.com/gpu": "2"}))

    assert seen == ["2"]
    after = parsed(core.read_node(NODE))
    assert after.status.allocatable["nvidia.com/gpu"] == "2"
    assert int(after.metadata.resource_version) > int(before)


_label_values = st.one_of(st.none(), st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,8}[a-z0-9])?", fullmatch=True))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(patch=st.dictionaries(st.sampled_from(["a", "b", "example.com/c", "nvidia.com/mig.config"]), _label_values))
def test_merge_patching_labels_leaves_exactly_the_merged_labels(
    core: client.CoreV1Api, patch: dict[str, str | None]
) -> None:
    before = parsed(core.read_node(NODE)).metadata.labels
    expected = {k: v for k, v in {**before, **patch}.items() if v is not None}

    node = parsed(core.patch_node(NODE, {"metadata": {"labels": patch}}, _content_type=MERGE_PATCH))

    assert node.metadata.labels == expected
