"""`serve_pod_resources`: a PodResources v1 server on a unix socket (the fake kubelet's side).

It answers from callables, so the caller's own state stays the single truth: `List` from
`provider`, `GetAllocatableResources` from `allocatable`, `Get` by filtering `provider`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from pathlib import Path

import grpc

from migagent.podresources.generated import api_pb2, api_pb2_grpc
from migagent.podresources.model import PodDevices, to_pod_resources

PodDevicesProvider = Callable[[], Sequence[PodDevices]]
AllocatableProvider = Callable[[], Mapping[str, Sequence[str]]]
# sockaddr_un.sun_path is 108 bytes on Linux, one of them the terminating NUL.
_MAX_UNIX_PATH_BYTES = 107


class _Lister(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, provider: PodDevicesProvider, allocatable: AllocatableProvider) -> None:
        self._provider = provider
        self._allocatable = allocatable

    def List(  # noqa: N802 (the gRPC method name)
        self, request: api_pb2.ListPodResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.ListPodResourcesResponse:
        return api_pb2.ListPodResourcesResponse(pod_resources=to_pod_resources(self._provider()))

    def GetAllocatableResources(  # noqa: N802
        self, request: api_pb2.AllocatableResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.AllocatableResourcesResponse:
        devices = [
            api_pb2.ContainerDevices(resource_name=name, device_ids=list(ids))
            for name, ids in sorted(self._allocatable().items())
        ]
        return api_pb2.AllocatableResourcesResponse(devices=devices)

    def Get(  # noqa: N802
        self, request: api_pb2.GetPodResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.GetPodResourcesResponse:
        wanted = [e for e in self._provider() if (e.namespace, e.name) == (request.pod_namespace, request.pod_name)]
        if not wanted:
            # The kubelet answers an unknown pod with an error, not an empty message.
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"pod {request.pod_name} in namespace {request.pod_namespace} not found"
            )
        return api_pb2.GetPodResourcesResponse(pod_resources=to_pod_resources(wanted)[0])


def serve_pod_resources(
    socket_path: str,
    provider: PodDevicesProvider,
    *,
    allocatable: AllocatableProvider | None = None,
    max_workers: int = 4,
) -> PodResourcesServer:
    """Start serving on `unix://<socket_path>` and return the started server.

    A socket file left by an earlier run is replaced, as the kubelet does. Stop it with
    `server.stop(grace)`; gRPC removes the socket file on shutdown.
    """
    if len(os.fsencode(socket_path)) > _MAX_UNIX_PATH_BYTES:
        raise ValueError(
            f"PodResources socket path {socket_path} is {len(os.fsencode(socket_path))} bytes; unix sockets "
            f"allow at most {_MAX_UNIX_PATH_BYTES}: choose a shorter path"
        )
    path = Path(socket_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_socket():
        path.unlink()
    elif path.exists():
        raise FileExistsError(f"PodResources socket path {socket_path} exists and is not a socket; remove it first")
    executor = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="podresources")
    server = grpc.server(executor)
    lister = _Lister(provider, allocatable or dict)
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(lister, server)  # type: ignore[no-untyped-call]
    if server.add_insecure_port(f"unix://{os.fspath(path)}") == 0:
        raise OSError(f"cannot bind the PodResources server to unix://{socket_path}")
    server.start()
    return PodResourcesServer(server, executor)


class PodResourcesServer:
    """A started server; `stop` also ends its worker threads (gRPC leaves the executor it was given running)."""

    def __init__(self, server: grpc.Server, executor: futures.ThreadPoolExecutor) -> None:
        self._server = server
        self._executor = executor

    def stop(self, grace: float | None) -> None:
        self._server.stop(grace).wait()
        self._executor.shutdown(wait=True)
