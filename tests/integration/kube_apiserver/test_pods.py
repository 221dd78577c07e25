"""Pods, evictions, PDBs and DaemonSets through CoreV1Api, PolicyV1Api and AppsV1Api."""

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from migagent_sim.apiserver import FakeApiServer, daemonset_object
from tests.integration.kube_apiserver.conftest import NODE
from tests.integration.kube_apiserver.support import parsed, status_body
from tests.waiting import eventually

MIG = {"nvidia.com/mig-1g.10gb": 1}


def _evict(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
    return parsed(core.create_namespaced_pod_eviction(name, namespace, body))


GRACE_S = 1000


@pytest.fixture
def workload(server: FakeApiServer) -> dict[str, Any]:
    return server.create_pod(
        node_name=NODE,
        namespace="team-a",
        name="trainer",
        labels={"app": "trainer"},
        owner_kind="ReplicaSet",
        resources=MIG,
    )


def test_pods_are_listed_by_node_name_and_label_selector_across_namespaces(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.create_pod(node_name=NODE, namespace="a", name="gpu-1", labels={"app": "gpu"})
    server.create_pod(node_name=NODE, namespace="b", name="gpu-2", labels={"app": "gpu"})
    server.create_pod(node_name=NODE, namespace="a", name="web", labels={"app": "web"})
    server.create_pod(node_name="elsewhere", namespace="a", name="gpu-3", labels={"app": "gpu"})

    pods = parsed(
        core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={NODE}", label_selector="app in (gpu)")
    )

    assert sorted((p.metadata.namespace, p.metadata.name) for p in pods.items) == [("a", "gpu-1"), ("b", "gpu-2")]


def test_namespaced_pod_list_honours_not_equal_and_notin_selectors(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.create_pod(node_name=NODE, namespace="a", name="plugin", labels={"app": "nvidia-device-plugin-daemonset"})
    server.create_pod(node_name=NODE, namespace="a", name="worker", labels={"app": "w", "tier": "x"})
    server.create_pod(node_name=NODE, namespace="b", name="other", labels={"app": "w"})

    pods = parsed(
        core.list_namespaced_pod(
            "a", field_selector=f"spec.nodeName=={NODE},status.phase!=Succeeded", label_selector="app!=w,tier notin (y)"
        )
    )

    assert [p.metadata.name for p in pods.items] == ["plugin"]


def test_a_namespaced_pod_list_by_metadata_name_finds_only_that_pod_or_nothing(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.create_pod(node_name=NODE, namespace="a", name="trainer", labels={"app": "t"})
    server.create_pod(node_name=NODE, namespace="a", name="trainer-2", labels={"app": "t"})
    server.create_pod(node_name=NODE, namespace="b", name="trainer", labels={"app": "t"})

    found = parsed(core.list_namespaced_pod("a", field_selector="metadata.name=trainer")).items
    missing = parsed(core.list_namespaced_pod("a", field_selector="metadata.name=ghost")).items

    assert [(p.metadata.namespace, p.metadata.name) for p in found] == [("a", "trainer")]
    assert missing == []


def test_an_unsupported_field_selector_is_a_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core.list_pod_for_all_namespaces(field_selector="spec.containers=x")

    assert raised.value.status == 400


def test_owner_references_and_mirror_annotations_parse_in_the_client(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.create_pod(node_name=NODE, namespace="kube-system", name="ds-pod", owner_kind="DaemonSet")
    server.create_pod(node_name=NODE, namespace="kube-system", name="static-pod", mirror=True)

    pods = {p.metadata.name: p for p in parsed(core.list_namespaced_pod("kube-system")).items}

    assert pods["ds-pod"].metadata.owner_references[0].kind == "DaemonSet"
    assert "kubernetes.io/config.mirror" in pods["static-pod"].metadata.annotations


def test_a_deleted_pod_stays_terminating_for_its_grace_period_then_reads_404(
    server: FakeApiServer, core: client.CoreV1Api, workload: dict[str, Any]
) -> None:
    deleted: list[str] = []
    listed_when_told: list[bool] = []

    def told(pod: dict[str, Any]) -> None:
        deleted.append(pod["metadata"]["uid"])
        listed_when_told.append(server.pod("team-a", "trainer") is not None)

    server.on_pod_deleted(told)

    # The server scales grace periods by 0.01: 1000 s leaves the checks below 10 s of Terminating, where
    # 5 s (50 ms) was outrun by a loaded machine between the DELETE and the next read.
    returned = core.delete_namespaced_pod("trainer", "team-a", grace_period_seconds=GRACE_S)

    assert isinstance(returned, client.V1Pod)
    metadata = parsed(returned.metadata)
    assert metadata.uid == workload["metadata"]["uid"]
    assert metadata.deletion_timestamp is not None
    assert metadata.deletion_grace_period_seconds == GRACE_S
    # Terminating: still there, marked, and its devices not yet released (no deletion seen).
    terminating = parsed(core.read_namespaced_pod("trainer", "team-a").metadata)
    assert terminating.deletion_timestamp is not None
    assert deleted == []
    eventually(lambda: deleted == [workload["metadata"]["uid"]], what="the pod's grace period to end", timeout_s=120)
    eventually(lambda: _gone(core, "trainer", "team-a"), what="the pod removed", timeout_s=120)
    # Told once, while the pod was still there: a kubelet stops the containers, then deletes the pod, so
    # whoever reads the pod gone finds its process gone too.
    assert deleted == [workload["metadata"]["uid"]]
    assert listed_when_told == [True]


def test_a_pod_deleted_with_grace_period_zero_goes_at_once(
    server: FakeApiServer, core: client.CoreV1Api, workload: dict[str, Any]
) -> None:
    core.delete_namespaced_pod("trainer", "team-a", grace_period_seconds=0)

    with pytest.raises(ApiException) as raised:
        core.read_namespaced_pod("trainer", "team-a")
    assert raised.value.status == 404


def test_a_failing_listener_does_not_fail_the_delete_and_is_reported(
    server: FakeApiServer, core: client.CoreV1Api, workload: dict[str, Any]
) -> None:
    def broken(pod: dict[str, Any]) -> None:
        raise RuntimeError("listener bug")

    server.on_pod_deleted(broken)

    core.delete_namespaced_pod("trainer", "team-a")

    eventually(lambda: server.pod("team-a", "trainer") is None, what="the pod to finish terminating")
    eventually(lambda: [str(e) for e in server.listener_errors] == ["listener bug"], what="the listener error")


def test_a_pod_created_with_an_owner_name_points_at_that_owner(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.create_pod(
        node_name=NODE, namespace="gpu-operator", name="plugin-x", owner_kind="DaemonSet", owner_name="plugin"
    )

    owner = parsed(core.read_namespaced_pod("plugin-x", "gpu-operator")).metadata.owner_references[0]

    assert (owner.api_version, owner.kind, owner.name, owner.controller) == ("apps/v1", "DaemonSet", "plugin", True)


def test_deleting_a_missing_pod_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core.delete_namespaced_pod("ghost", "team-a")

    assert raised.value.status == 404


def test_eviction_without_a_pdb_is_201_success_and_removes_the_pod(
    server: FakeApiServer, core: client.CoreV1Api, workload: dict[str, Any]
) -> None:
    answer = _evict(core, "team-a", "trainer")

    assert answer.kind == "Status"
    assert server.requests[-1].status == 201
    eventually(lambda: server.pod("team-a", "trainer") is None, what="the pod to finish terminating")


def test_eviction_blocked_by_a_pdb_allowing_no_disruption_is_429_without_retry_after(
    server: FakeApiServer, core: client.CoreV1Api, workload: dict[str, Any]
) -> None:
    server.add_pdb("team-a", "trainer-pdb", match_labels={"app": "trainer"}, disruptions_allowed=0)

    with pytest.raises(ApiException) as raised:
        _evict(core, "team-a", "trainer")

    body = status_body(raised.value)
    assert raised.value.status == 429
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    # StatusCause's Go field Type is serialised as "reason"; the message names the budget and its health.
    message = "The disruption budget trainer-pdb needs 1 healthy pods and has 1 currently"
    assert body["details"]["causes"] == [{"reason": "DisruptionBudget", "message": message}]
    assert "Retry-After" not in parsed(raised.value.headers)
    assert server.pod("team-a", "trainer") is not None


def test_a_blocking_pdb_without_health_counts_in_its_status_reports_zero_for_both(
    server: FakeApiServer, core: client.CoreV1Api, workload: dict[str, Any]
) -> None:
    server.add_pdb("team-a", "bare", match_labels={"app": "trainer"}, disruptions_allowed=0)
    server.set_pdb_status("team-a", "bare", {"observedGeneration": 1, "disruptionsAllowed": 0})

    with pytest.raises(ApiException) as raised:
        _evict(core, "team-a", "trainer")

    causes = status_body(raised.value)["details"]["causes"]
    assert causes == [
        {"reason": "DisruptionBudget", "message": "The disruption budget bare needs 0 healthy pods and has 0 currently"}
    ]


def test_eviction_succeeds_once_the_pdb_allows_a_disruption(
    server: FakeApiServer, core: client.CoreV1Api, workload: dict[str, Any]
) -> None:
    server.add_pdb("team-a", "trainer-pdb", match_labels={"app": "trainer"}, disruptions_allowed=0)
    server.set_pdb_disruptions_allowed("team-a", "trainer-pdb", 1)

    _evict(core, "team-a", "trainer")

    eventually(lambda: server.pod("team-a", "trainer") is None, what="the pod to finish terminating")


def test_eviction_of_a_pod_matched_by_two_pdbs_is_500(
    server: FakeApiServer, core: client.CoreV1Api, workload: dict[str, Any]
) -> None:
    server.add_pdb("team-a", "one", match_labels={"app": "trainer"}, disruptions_allowed=1)
    server.add_pdb("team-a", "two", match_labels={}, disruptions_allowed=1)

    with pytest.raises(ApiException) as raised:
        _evict(core, "team-a", "trainer")

    assert raised.value.status == 500
    assert "more than one PodDisruptionBudget" in status_body(raised.value)["message"]


def test_a_pdb_in_another_namespace_does_not_block_eviction(
    server: FakeApiServer, core: client.CoreV1Api, workload: dict[str, Any]
) -> None:
    server.add_pdb("team-b", "trainer-pdb", match_labels={"app": "trainer"}, disruptions_allowed=0)

    _evict(core, "team-a", "trainer")

    eventually(lambda: server.pod("team-a", "trainer") is None, what="the pod to finish terminating")


def test_eviction_of_a_missing_pod_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        _evict(core, "team-a", "ghost")

    assert raised.value.status == 404


def test_pdbs_are_listed_with_their_disruptions_allowed(server: FakeApiServer, policy: client.PolicyV1Api) -> None:
    server.add_pdb("team-a", "trainer-pdb", match_labels={"app": "trainer"}, disruptions_allowed=2)

    budgets = parsed(policy.list_namespaced_pod_disruption_budget("team-a")).items

    assert [(b.metadata.name, b.status.disruptions_allowed) for b in budgets] == [("trainer-pdb", 2)]
    assert budgets[0].spec.selector.match_labels == {"app": "trainer"}


def test_daemonsets_are_listed_in_all_namespaces_and_read_by_name(
    server: FakeApiServer, apps: client.AppsV1Api
) -> None:
    plugin = daemonset_object(
        "gpu-operator",
        "nvidia-device-plugin-daemonset",
        match_labels={"app": "nvidia-device-plugin-daemonset"},
        node_selector={"nvidia.com/gpu.deploy.device-plugin": "true"},
    )
    server.add_daemonset(plugin)

    listed = parsed(apps.list_daemon_set_for_all_namespaces()).items
    read = parsed(apps.read_namespaced_daemon_set("nvidia-device-plugin-daemonset", "gpu-operator"))

    assert [d.metadata.name for d in listed] == ["nvidia-device-plugin-daemonset"]
    assert read.spec.selector.match_labels == {"app": "nvidia-device-plugin-daemonset"}
    assert read.spec.template.spec.node_selector == {"nvidia.com/gpu.deploy.device-plugin": "true"}
    assert read.status.number_ready == 1


def _gone(core: client.CoreV1Api, name: str, namespace: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False
