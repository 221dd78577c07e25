"""`PodResourcesClient`: the agent's read of which pod holds which device, from the kubelet socket."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import grpc

from migagent.errors import TransientError
from migagent.podresources.generated import api_pb2, api_pb2_grpc
from migagent.podresources.model import PodDevices, from_pod_resources

DEFAULT_SOCKET_PATH = "/var/lib/kubelet/pod-resources/kubelet.sock"
# Python's gRPC default (4 MiB) is too small for a busy node; Go consumers use 16 MiB (docs/device-plugin.md §4).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# The kubelet rate-limits this socket and can restart at any moment: a retry a little later usually works.
_RETRY_DELAY_S = 2.0

Stub = Any  # the generated stub is untyped; each call below names its response type


class PodResourcesClient:
    """`PodResourcesClient("/var/lib/kubelet/pod-resources/kubelet.sock").list()`.

    Each call opens its own channel: the kubelet recreates the socket when it restarts, and a
    channel per call always dials the current one. Every failure is a TransientError naming the socket.
    """

    def __init__(self, socket_path: str, *, timeout_s: float = 10) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.socket_path = socket_path
        self.timeout_s = timeout_s

    @property
    def target(self) -> str:
        return f"unix://{self.socket_path}"

    def list(self) -> tuple[PodDevices, ...]:
        """Every device the kubelet has assigned to a container of an active pod on this node.

        Device ids are physical ids (a time-slicing replica suffix `::N` is removed).
        """
        request = api_pb2.ListPodResourcesRequest()
        response: api_pb2.ListPodResourcesResponse = self._call(
            "List", lambda s: s.List(request, timeout=self.timeout_s)
        )
        return from_pod_resources(response.pod_resources)

    def get(self, namespace: str, name: str) -> tuple[PodDevices, ...]:
        """The devices of one pod; empty when the kubelet does not know the pod.

        `Get` needs Kubernetes >= 1.34 or the KubeletPodResourcesGet gate; `list` works everywhere.
        """
        request = api_pb2.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace)
        try:
            response: api_pb2.GetPodResourcesResponse = self._call(
                "Get", lambda s: s.Get(request, timeout=self.timeout_s)
            )
        except TransientError as exc:
            if _status_code(exc.__cause__) is grpc.StatusCode.NOT_FOUND:
                return ()
            raise
        return from_pod_resources([response.pod_resources])

    def allocatable(self) -> dict[str, tuple[str, ...]]:
        """Resource name -> every device id the kubelet can hand out (held or free)."""
        request = api_pb2.AllocatableResourcesRequest()
        response: api_pb2.AllocatableResourcesResponse = self._call(
            "GetAllocatableResources", lambda s: s.GetAllocatableResources(request, timeout=self.timeout_s)
        )
        by_resource: dict[str, list[str]] = {}
        for devices in response.devices:
            by_resource.setdefault(devices.resource_name, []).extend(devices.device_ids)
        return {name: tuple(ids) for name, ids in by_resource.items()}

    def _call(self, method: str, invoke: Callable[[Stub], Any]) -> Any:
        if not os.path.exists(self.socket_path):
            raise TransientError(
                f"PodResources {method}: socket {self.socket_path} does not exist "
                "(is the kubelet running and /var/lib/kubelet/pod-resources mounted into this pod?)",
                delay=_RETRY_DELAY_S,
            )
        options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        try:
            with grpc.insecure_channel(self.target, options=options) as channel:
                return invoke(api_pb2_grpc.PodResourcesListerStub(channel))  # type: ignore[no-untyped-call]
        except grpc.RpcError as exc:
            raise TransientError(
                f"PodResources {method} on {self.target} failed: {_describe(exc)}", delay=_RETRY_DELAY_S
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
