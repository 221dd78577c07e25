"""`PodResourcesClient`: the agent's read of which pod holds which device, from the kubelet socket."""

from __future__ import annotations

import os
from typing import Any

import grpc

from migagent.errors import TransientError
from migagent.podresources.generated import api_pb2, api_pb2_grpc
from migagent.podresources.model import PodDevices, from_pod_resources

DEFAULT_SOCKET_PATH = "/var/lib/kubelet/pod-resources/kubelet.sock"
# Python's gRPC default (4 MiB) is too small for a busy node; Go consumers use 16 MiB (reference §1.1).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# The kubelet rate-limits this socket and can restart at any moment: a retry a little later usually works.
_RETRY_DELAY_S = 2.0


class PodResourcesClient:
    """`PodResourcesClient("/var/lib/kubelet/pod-resources/kubelet.sock").list()`.

    Each call opens its own channel: the kubelet recreates the socket when it restarts, and a
    channel per call always dials the current one.
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
        Raises TransientError when the socket is missing or the call fails.
        """
        response: api_pb2.ListPodResourcesResponse = self._call("List", api_pb2.ListPodResourcesRequest())
        return from_pod_resources(response.pod_resources)

    def allocatable(self) -> dict[str, tuple[str, ...]]:
        """Resource name -> every device id the kubelet can hand out (held or free)."""
        response: api_pb2.AllocatableResourcesResponse = self._call(
            "GetAllocatableResources", api_pb2.AllocatableResourcesRequest()
        )
        by_resource: dict[str, list[str]] = {}
        for devices in response.devices:
            by_resource.setdefault(devices.resource_name, []).extend(devices.device_ids)
        return {name: tuple(ids) for name, ids in by_resource.items()}

    def _call(self, method: str, request: object) -> Any:
        if not os.path.exists(self.socket_path):
            raise TransientError(
                f"PodResources {method}: socket {self.socket_path} does not exist "
                "(is the kubelet running and /var/lib/kubelet/pod-resources mounted into this pod?)",
                delay=_RETRY_DELAY_S,
            )
        options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        try:
            with grpc.insecure_channel(self.target, options=options) as channel:
                stub = api_pb2_grpc.PodResourcesListerStub(channel)
                return getattr(stub, method)(request, timeout=self.timeout_s)
        except grpc.RpcError as exc:
            raise TransientError(
                f"PodResources {method} on {self.target} failed: {_describe(exc)}", delay=_RETRY_DELAY_S
            ) from exc


def _describe(exc: grpc.RpcError) -> str:
    """`UNAVAILABLE: <details>`; an RpcError raised by a call is also a grpc.Call carrying both."""
    code = exc.code() if isinstance(exc, grpc.Call) else None
    details = exc.details() if isinstance(exc, grpc.Call) else None
    name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
    return f"{name}: {details or exc}"
