"""The gRPC side of the PodResources API: the calls on the kubelet's socket and the mapping between
its messages and `PodDevices`. Imported at the first call (see `client`), never with the agent."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import grpc

from migagent.errors import TransientError
from migagent.podresources.generated import api_pb2, api_pb2_grpc
from migagent.podresources.model import PodDevices, physical_device_id

# Python's gRPC default (4 MiB) is too small for a busy node; Go consumers use 16 MiB (reference §1.1).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# The kubelet rate-limits this socket and can restart at any moment: a retry a little later usually works.
_RETRY_DELAY_S = 2.0

Stub = Any  # the generated stub is untyped; each call below names its response type


def list_pods(socket_path: str, timeout_s: float) -> tuple[PodDevices, ...]:
    request = api_pb2.ListPodResourcesRequest()
    response: api_pb2.ListPodResourcesResponse = _call(
        socket_path, "List", lambda s: s.List(request, timeout=timeout_s)
    )
    return from_pod_resources(response.pod_resources)


def get_pod(socket_path: str, timeout_s: float, namespace: str, name: str) -> tuple[PodDevices, ...]:
    request = api_pb2.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace)
    try:
        response: api_pb2.GetPodResourcesResponse = _call(
            socket_path, "Get", lambda s: s.Get(request, timeout=timeout_s)
        )
    except TransientError as exc:
        if _status_code(exc.__cause__) is grpc.StatusCode.NOT_FOUND:
            return ()
        raise
    return from_pod_resources([response.pod_resources])


def allocatable(socket_path: str, timeout_s: float) -> dict[str, tuple[str, ...]]:
    request = api_pb2.AllocatableResourcesRequest()
    response: api_pb2.AllocatableResourcesResponse = _call(
        socket_path, "GetAllocatableResources", lambda s: s.GetAllocatableResources(request, timeout=timeout_s)
    )
    by_resource: dict[str, list[str]] = {}
    for devices in response.devices:
        by_resource.setdefault(devices.resource_name, []).extend(devices.device_ids)
    return {name: tuple(ids) for name, ids in by_resource.items()}


def _call(socket_path: str, method: str, invoke: Callable[[Stub], Any]) -> Any:
    if not os.path.exists(socket_path):
        raise TransientError(
            f"PodResources {method}: socket {socket_path} does not exist "
            "(is the kubelet running and /var/lib/kubelet/pod-resources mounted into this pod?)",
            delay=_RETRY_DELAY_S,
        )
    target = f"unix://{socket_path}"
    options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
    try:
        with grpc.insecure_channel(target, options=options) as channel:
            return invoke(api_pb2_grpc.PodResourcesListerStub(channel))  # type: ignore[no-untyped-call]
    except grpc.RpcError as exc:
        raise TransientError(
            f"PodResources {method} on {target} failed: {_describe(exc)}", delay=_RETRY_DELAY_S
        ) from exc


def _status_code(exc: BaseException | None) -> grpc.StatusCode | None:
    """An RpcError raised by a call is also a grpc.Call, which carries the status code."""
    code = exc.code() if isinstance(exc, grpc.Call) else None
    return code if isinstance(code, grpc.StatusCode) else None


def _describe(exc: grpc.RpcError) -> str:
    """`UNAVAILABLE: <details>`."""
    code = _status_code(exc)
    details = exc.details() if isinstance(exc, grpc.Call) else None
    return f"{code.name if code else 'UNKNOWN'}: {details or exc}"


def from_pod_resources(pods: Iterable[api_pb2.PodResources]) -> tuple[PodDevices, ...]:
    """Flatten the kubelet's pod -> container -> resource tree; containers without devices vanish."""
    flat: list[PodDevices] = []
    for pod in pods:
        for container in pod.containers:
            for devices in container.devices:
                ids = tuple(dict.fromkeys(physical_device_id(d) for d in devices.device_ids))
                flat.append(PodDevices(pod.namespace, pod.name, container.name, devices.resource_name, ids))
    return tuple(flat)


def to_pod_resources(entries: Sequence[PodDevices]) -> list[api_pb2.PodResources]:
    """Group flat entries back into one message per pod and one container entry per container name."""
    pods: dict[tuple[str, str], dict[str, list[api_pb2.ContainerDevices]]] = {}
    for entry in entries:
        containers = pods.setdefault((entry.namespace, entry.name), {})
        containers.setdefault(entry.container, []).append(
            api_pb2.ContainerDevices(resource_name=entry.resource_name, device_ids=list(entry.device_ids))
        )
    return [
        api_pb2.PodResources(
            namespace=namespace,
            name=name,
            containers=[api_pb2.ContainerResources(name=c, devices=devs) for c, devs in containers.items()],
        )
        for (namespace, name), containers in pods.items()
    ]
