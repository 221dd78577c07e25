"""A device plugin for one resource, speaking the real v1beta1 API: the simulated NVIDIA plugin's side.

It serves DevicePlugin on `<socket_dir>/nvidia-<name>.sock` (NVIDIA's naming, internal/plugin/
server.go getPluginSocketPath) and registers with the kubelet's `kubelet.sock` there, announcing
GetPreferredAllocation as NVIDIA's plugin does. ListAndWatch sends the device list, then a new
list whenever a device's health changes, until the server stops. Allocate refuses unknown device
ids and, where `max_replicas_per_request` says so, a request for more than one shared replica
(time-slicing `failRequestsGreaterThanOne`, rm.ValidateRequest); it answers
NVIDIA_VISIBLE_DEVICES with the physical ids (replica suffixes stripped).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc

from migagent_sim.deviceplugin.generated.v1beta1 import api_pb2, api_pb2_grpc
from migagent_sim.deviceplugin.manager import HEALTHY, UNHEALTHY
from migagent_sim.deviceplugin.registration import KUBELET_SOCKET, VERSION
from migagent_sim.unix_grpc import UnixServer, unix_channel

REPLICA_SEPARATOR = "::"
_REGISTER_TIMEOUT_S = 10.0


def plugin_socket_name(resource: str) -> str:
    """`nvidia.com/mig-1g.10gb` -> `nvidia-mig-1g.10gb.sock`."""
    return f"nvidia-{resource.split('/', 1)[-1]}.sock"


class SimulatedPluginServer(api_pb2_grpc.DevicePluginServicer):
    def __init__(
        self,
        resource: str,
        device_ids: Sequence[str],
        *,
        socket_dir: str,
        fail_requests_greater_than_one: bool = False,
    ) -> None:
        self.resource = resource
        self.device_ids = tuple(device_ids)
        self._health = dict.fromkeys(device_ids, HEALTHY)
        self.socket_path = str(Path(socket_dir) / plugin_socket_name(resource))
        self._kubelet_socket = str(Path(socket_dir) / KUBELET_SOCKET)
        self._fail_greater_than_one = fail_requests_greater_than_one
        self._server: UnixServer | None = None
        self._stopped = threading.Event()
        self._watchers: list[queue.SimpleQueue[bool]] = []
        self._lock = threading.Lock()
        self.allocations: list[tuple[str, ...]] = []

    # --- lifecycle (Start, Serve, Register, Stop) ------------------------------------------------

    def start(self) -> None:
        """Serve on the plugin socket and register with the kubelet; raises grpc.RpcError when refused."""
        server = UnixServer(4, "sim-device-plugin")
        api_pb2_grpc.add_DevicePluginServicer_to_server(self, server.grpc)  # type: ignore[no-untyped-call]
        server.start(self.socket_path, f"device plugin {self.resource}")
        self._server = server
        try:
            self._register()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            for watcher in self._watchers:
                watcher.put(False)
        server, self._server = self._server, None
        if server is not None:
            server.stop(None)
        Path(self.socket_path).unlink(missing_ok=True)

    def set_health(self, device_id: str, healthy: bool) -> None:
        """Mark a device (un)healthy; every ListAndWatch stream sends the new list."""
        with self._lock:
            if device_id not in self._health:
                raise KeyError(f"{device_id} is not a device of {self.resource}; devices: {list(self._health)}")
            self._health[device_id] = HEALTHY if healthy else UNHEALTHY
            for watcher in self._watchers:
                watcher.put(True)

    def _register(self) -> None:
        with unix_channel(self._kubelet_socket) as channel:
            stub = api_pb2_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
            request = api_pb2.RegisterRequest(
                version=VERSION,
                endpoint=Path(self.socket_path).name,
                resource_name=self.resource,
                options=api_pb2.DevicePluginOptions(get_preferred_allocation_available=True),
            )
            stub.Register(request, timeout=_REGISTER_TIMEOUT_S, wait_for_ready=True)

    # --- the DevicePlugin service ----------------------------------------------------------------

    def GetDevicePluginOptions(  # noqa: N802 (gRPC method names)
        self, request: api_pb2.Empty, context: grpc.ServicerContext
    ) -> api_pb2.DevicePluginOptions:
        return api_pb2.DevicePluginOptions(get_preferred_allocation_available=True)

    def ListAndWatch(  # noqa: N802
        self, request: api_pb2.Empty, context: grpc.ServicerContext
    ) -> Iterator[api_pb2.ListAndWatchResponse]:
        changes: queue.SimpleQueue[bool] = queue.SimpleQueue()
        with self._lock:
            self._watchers.append(changes)
        try:
            yield self._devices()
            while not self._stopped.is_set() and context.is_active():
                try:
                    if not changes.get(timeout=0.5):
                        return
                except queue.Empty:
                    continue
                yield self._devices()
        finally:
            with self._lock:
                self._watchers.remove(changes)

    def GetPreferredAllocation(  # noqa: N802
        self, request: api_pb2.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> api_pb2.PreferredAllocationResponse:
        responses = []
        for container in request.container_requests:
            chosen = list(container.must_include_deviceIDs)
            chosen += [d for d in container.available_deviceIDs if d not in chosen]
            preferred = chosen[: container.allocation_size]
            responses.append(api_pb2.ContainerPreferredAllocationResponse(deviceIDs=preferred))
        return api_pb2.PreferredAllocationResponse(container_responses=responses)

    def Allocate(  # noqa: N802
        self, request: api_pb2.AllocateRequest, context: grpc.ServicerContext
    ) -> api_pb2.AllocateResponse:
        responses = []
        for container in request.container_requests:
            problem = self._invalid(container.devices_ids)
            if problem:
                context.abort(grpc.StatusCode.UNKNOWN, f"invalid allocation request for {self.resource!r}: {problem}")
            self.allocations.append(tuple(container.devices_ids))
            physical = dict.fromkeys(d.split(REPLICA_SEPARATOR, 1)[0] for d in container.devices_ids)
            responses.append(api_pb2.ContainerAllocateResponse(envs={"NVIDIA_VISIBLE_DEVICES": ",".join(physical)}))
        return api_pb2.AllocateResponse(container_responses=responses)

    def PreStartContainer(  # noqa: N802
        self, request: api_pb2.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> api_pb2.PreStartContainerResponse:
        return api_pb2.PreStartContainerResponse()

    def _invalid(self, device_ids: Sequence[str]) -> str | None:
        unknown = [d for d in device_ids if d not in self._health]
        if unknown:
            return f"invalid request: unknown device: {unknown[0]}"
        replicas = any(REPLICA_SEPARATOR in d for d in device_ids)
        if self._fail_greater_than_one and replicas and len(device_ids) > 1:
            return f"invalid request: maximum request size for shared resources is 1; found {len(device_ids)}"
        return None

    def _devices(self) -> api_pb2.ListAndWatchResponse:
        with self._lock:
            devices = [api_pb2.Device(ID=device, health=health) for device, health in self._health.items()]
        return api_pb2.ListAndWatchResponse(devices=devices)
