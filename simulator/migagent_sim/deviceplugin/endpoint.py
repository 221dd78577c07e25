"""The kubelet's client of one registered device plugin (devicemanager/plugin/v1beta1/client.go).

`connect` dials the plugin's socket and asks GetDevicePluginOptions (PluginConnected); `run` reads
ListAndWatch on a thread of its own, handing every response to the manager, and tells the manager
the plugin disconnected when the stream ends, whatever ended it (plugin stopped, crashed, or the
kubelet closing the connection). Allocation calls go over the same connection.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import grpc

from migagent_sim.deviceplugin.generated.v1beta1 import api_pb2, api_pb2_grpc
from migagent_sim.deviceplugin.manager import AllocationError, DeviceManager, RegistrationError
from migagent_sim.unix_grpc import unix_channel

DIAL_TIMEOUT_S = 10.0
"""The kubelet's dial timeout for a plugin's socket (client.go dial)."""
CALL_TIMEOUT_S = 30.0
_LOG = logging.getLogger(__name__)


class PluginClient:
    def __init__(
        self, resource: str, socket_path: str, manager: DeviceManager, *, dial_timeout_s: float = DIAL_TIMEOUT_S
    ) -> None:
        self.resource = resource
        self._dial_timeout_s = dial_timeout_s
        self._socket_path = socket_path
        self._manager = manager
        self._channel: grpc.Channel | None = None
        self._stub: api_pb2_grpc.DevicePluginStub | None = None
        self._options = api_pb2.DevicePluginOptions()
        self._stream: grpc.Future | None = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()

    @property
    def socket_path(self) -> str:
        return self._socket_path

    @property
    def preferred_allocation_available(self) -> bool:
        return bool(self._options.get_preferred_allocation_available)

    @property
    def pre_start_required(self) -> bool:
        return bool(self._options.pre_start_required)

    def connect(self) -> None:
        """Dial the plugin, read its options and join the manager; RegistrationError when that fails."""
        channel = unix_channel(self._socket_path)
        try:
            stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
            self._options = stub.GetDevicePluginOptions(
                api_pb2.Empty(), timeout=self._dial_timeout_s, wait_for_ready=True
            )
        except grpc.RpcError as exc:
            channel.close()
            raise RegistrationError(f"failed to dial device plugin at {self._socket_path}: {_describe(exc)}") from exc
        self._channel, self._stub = channel, stub
        try:
            self._manager.connected(self.resource, self)
        except RegistrationError:
            self.close()
            raise

    def run(self) -> None:
        """Start reading ListAndWatch on a daemon thread."""
        self._thread = threading.Thread(target=self._list_and_watch, name=f"kubelet-lw-{self.resource}", daemon=True)
        self._thread.start()

    def close(self, *, wait_s: float = 5.0) -> None:
        """Close the connection (the stream ends, and with it the endpoint); idempotent."""
        self._closed.set()
        stream, channel = self._stream, self._channel
        if stream is not None:
            stream.cancel()
        if channel is not None:
            channel.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=wait_s)

    def _list_and_watch(self) -> None:
        assert self._stub is not None
        try:
            stream = self._stub.ListAndWatch(api_pb2.Empty())
            self._stream = stream
            if self._closed.is_set():
                stream.cancel()
            for response in stream:
                self._manager.devices_listed(self.resource, [(d.ID, d.health) for d in response.devices])
        except grpc.RpcError as exc:
            if not self._closed.is_set():
                _LOG.info("ListAndWatch ended for %s at %s: %s", self.resource, self._socket_path, _describe(exc))
        finally:
            self._manager.disconnected(self.resource, self._socket_path)
            if self._channel is not None:
                self._channel.close()

    # --- allocation (endpoint.go) -------------------------------------------------------------

    def preferred_allocation(self, available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
        request = api_pb2.PreferredAllocationRequest(
            container_requests=[
                api_pb2.ContainerPreferredAllocationRequest(
                    available_deviceIDs=list(available), must_include_deviceIDs=list(must_include), allocation_size=size
                )
            ]
        )
        response = self._call("GetPreferredAllocation", request)
        return list(response.container_responses[0].deviceIDs) if response.container_responses else []

    def allocate(self, device_ids: Sequence[str]) -> dict[str, str]:
        request = api_pb2.AllocateRequest(
            container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=list(device_ids))]
        )
        response = self._call("Allocate", request)
        if not response.container_responses:
            raise AllocationError(f"no containers return in allocation response {response}")
        return dict(response.container_responses[0].envs)

    def pre_start(self, device_ids: Sequence[str]) -> None:
        self._call("PreStartContainer", api_pb2.PreStartContainerRequest(devices_ids=list(device_ids)))

    def _call(self, method: str, request: object) -> api_pb2.AllocateResponse:
        if self._stub is None or self._closed.is_set():
            raise AllocationError(f"endpoint {self._socket_path} of {self.resource} is stopped")
        try:
            response: api_pb2.AllocateResponse = getattr(self._stub, method)(request, timeout=CALL_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise AllocationError(_describe(exc)) from exc
        return response


def _describe(exc: BaseException) -> str:
    if isinstance(exc, grpc.RpcError) and isinstance(exc, grpc.Call):
        return f"{exc.code().name}: {exc.details()}"
    return str(exc) or type(exc).__name__
