"""`serve_pod_resources`: a PodResources v1 server on a unix socket (the fake kubelet's side).

It answers from callables, so the caller's own state stays the single truth: `List` from
`provider`, `GetAllocatableResources` from `allocatable`, `Get` by filtering `provider`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import grpc

from migagent.podresources.generated import api_pb2, api_pb2_grpc
from migagent.podresources.model import PodDevices, to_pod_resources
from migagent_sim.unix_grpc import UnixServer, check_socket_path

PodResourcesServer = UnixServer

PodDevicesProvider = Callable[[], Sequence[PodDevices]]
AllocatableProvider = Callable[[], Mapping[str, Sequence[str]]]


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
    check_socket_path(socket_path, "PodResources")
    server = PodResourcesServer(max_workers, "podresources")
    lister = _Lister(provider, allocatable or dict)
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(lister, server.grpc)  # type: ignore[no-untyped-call]
    server.start(socket_path, "PodResources")
    return server
