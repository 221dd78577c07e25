from __future__ import annotations

import datetime

import pytest
from kubernetes.client import (
    V1Container,
    V1Node,
    V1NodeCondition,
    V1NodeSpec,
    V1NodeStatus,
    V1ObjectMeta,
    V1OwnerReference,
    V1Pod,
    V1PodSpec,
    V1PodStatus,
    V1ResourceRequirements,
)
from kubernetes.client.exceptions import ApiException

from migagent.errors import PermanentError, TransientError
from migagent.kube.classify import classify
from migagent.kube.convert import node_view, pod_view, rfc3339


def test_node_view_reads_quantities_as_whole_numbers_and_keeps_conditions() -> None:
    node = V1Node(
        metadata=V1ObjectMeta(name="n1", uid="u1", resource_version="7", labels={"a": "b"}),
        spec=V1NodeSpec(unschedulable=True),
        status=V1NodeStatus(
            allocatable={"nvidia.com/mig-1g.5gb": "7", "cpu": "7500m", "memory": "2Ki", "odd": "lots"},
            conditions=[
                V1NodeCondition(
                    type="MigConfigReady",
                    status="True",
                    reason="Applied",
                    last_transition_time=datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
                )
            ],
        ),
    )
    view = node_view(node)
    assert view.unschedulable
    assert view.allocatable == {"nvidia.com/mig-1g.5gb": 7, "cpu": 7, "memory": 2048}
    condition = view.condition("MigConfigReady")
    assert condition is not None
    assert condition.last_transition_time == "2026-01-02T03:04:05Z"
    assert view.condition("Ready") is None


def _pod(**meta: object) -> V1Pod:
    return V1Pod(
        metadata=V1ObjectMeta(name="p", namespace="ns", uid="u", **meta),  # type: ignore[arg-type]
        spec=V1PodSpec(
            node_name="n1",
            containers=[
                V1Container(name="a", resources=V1ResourceRequirements(limits={"nvidia.com/mig-1g.5gb": "1"})),
                V1Container(name="b", resources=V1ResourceRequirements(requests={"nvidia.com/gpu": "0", "cpu": "1"})),
            ],
            init_containers=[V1Container(name="i", resources=V1ResourceRequirements(requests={"nvidia.com/gpu": "1"}))],
        ),
        status=V1PodStatus(phase="Running"),
    )


def test_pod_view_collects_gpu_resources_from_requests_and_limits_of_all_containers() -> None:
    view = pod_view(_pod())
    assert view.gpu_resources == frozenset({"nvidia.com/mig-1g.5gb", "nvidia.com/gpu"})
    assert str(view.ref) == "ns/p"
    assert not view.deleting


def test_pod_view_recognises_daemonset_owners_mirror_pods_and_deletion() -> None:
    owner = V1OwnerReference(api_version="apps/v1", kind="DaemonSet", name="ds", uid="x")
    view = pod_view(
        _pod(
            owner_references=[owner],
            annotations={"kubernetes.io/config.mirror": "abc"},
            deletion_timestamp=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        )
    )
    assert view.is_daemonset_pod
    assert view.is_mirror
    assert view.deleting


@pytest.mark.parametrize("status", [0, 409, 429, 500, 503])
def test_conflicts_throttling_and_server_errors_are_transient(status: int) -> None:
    error = classify(ApiException(status=status, reason="x"), "patch node n1")
    assert isinstance(error, TransientError)
    assert "patch node n1" in str(error)


@pytest.mark.parametrize("status", [400, 403, 404, 422])
def test_forbidden_not_found_and_bad_requests_are_permanent(status: int) -> None:
    error = classify(ApiException(status=status, reason="x"), "get node n1")
    assert isinstance(error, PermanentError)
    assert not isinstance(error, TransientError)


def test_the_status_message_and_retry_after_of_the_server_are_used() -> None:
    exc = ApiException(status=429, reason="Too Many Requests")
    exc.body = '{"kind":"Status","message":"slow down"}'
    exc.headers = {"Retry-After": "7"}
    error = classify(exc, "evict pod a/b")
    assert isinstance(error, TransientError)
    assert error.delay == 7.0
    assert "slow down" in str(error)


def test_timestamps_are_rfc3339_utc_with_a_z() -> None:
    assert rfc3339(0.0) == "1970-01-01T00:00:00Z"
