"""The kubelet's device-plugin Registration server (devicemanager/plugin/v1beta1/server.go, handler.go).

It listens on `<socket_dir>/kubelet.sock`. At start it removes every socket left in the directory
(CleanupPluginDirectory: a plugin that still runs sees kubelet.sock created again and re-registers,
as NVIDIA's plugin does through its file watcher). A Register request is refused unless its version
is v1beta1 and its resource an extended resource name; otherwise the kubelet dials the endpoint the
plugin names (a socket in the same directory), reads its options, and reads its ListAndWatch.
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path

import grpc

from migagent_sim.deviceplugin.endpoint import DIAL_TIMEOUT_S, PluginClient
from migagent_sim.deviceplugin.generated.v1beta1 import api_pb2, api_pb2_grpc
from migagent_sim.deviceplugin.manager import DeviceManager, RegistrationError
from migagent_sim.unix_grpc import UnixServer

VERSION = "v1beta1"
SUPPORTED_VERSIONS = (VERSION,)
KUBELET_SOCKET = "kubelet.sock"
DEVICE_PLUGIN_PATH = "/var/lib/kubelet/device-plugins/"
"""Where a real node keeps these sockets; NVIDIA's plugin creates its own there whatever it is told."""
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_PREFIX = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LOG = logging.getLogger(__name__)


def is_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: a qualified `domain/name` outside kubernetes.io, not `requests.*`."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, short = ("requests." + name).partition("/")
    return (
        len(prefix) <= 253
        and bool(_QUALIFIED_PREFIX.match(prefix))
        and 0 < len(short) <= 63
        and bool(_QUALIFIED_NAME.match(short))
    )


class RegistrationServer(api_pb2_grpc.RegistrationServicer):
    def __init__(self, socket_dir: str, manager: DeviceManager, *, dial_timeout_s: float = DIAL_TIMEOUT_S) -> None:
        self.socket_dir = socket_dir
        self._dial_timeout_s = dial_timeout_s
        self._manager = manager
        self._server: UnixServer | None = None
        self._clients: list[PluginClient] = []
        self._lock = threading.Lock()
        self.registrations: list[str] = []
        """Resource names of every Register request accepted since the last start, in order."""

    @property
    def socket_path(self) -> str:
        return str(Path(self.socket_dir) / KUBELET_SOCKET)

    def start(self) -> None:
        self.registrations = []
        directory = Path(self.socket_dir)
        directory.mkdir(parents=True, exist_ok=True)
        for leftover in directory.iterdir():
            if leftover.is_socket():
                leftover.unlink(missing_ok=True)
        server = UnixServer(4, "kubelet-registration")
        api_pb2_grpc.add_RegistrationServicer_to_server(self, server.grpc)  # type: ignore[no-untyped-call]
        server.start(self.socket_path, "device plugin registration")
        self._server = server

    def stop(self) -> None:
        """Disconnect every plugin client, then stop serving (kubelet.sock goes away)."""
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()
        server, self._server = self._server, None
        if server is not None:
            server.stop(None)
        Path(self.socket_path).unlink(missing_ok=True)

    def Register(  # noqa: N802 (the gRPC method name)
        self, request: api_pb2.RegisterRequest, context: grpc.ServicerContext
    ) -> api_pb2.Empty:
        resource = request.resource_name
        if request.version not in SUPPORTED_VERSIONS:
            context.abort(
                grpc.StatusCode.UNKNOWN,
                f"requested device plugin version {request.version} is not supported;"
                f" supported: {list(SUPPORTED_VERSIONS)}",
            )
        if not is_extended_resource_name(resource):
            context.abort(grpc.StatusCode.UNKNOWN, f"invalid name of device plugin socket: {resource}")
        endpoint = str(Path(self.socket_dir) / request.endpoint)
        client = PluginClient(resource, endpoint, self._manager, dial_timeout_s=self._dial_timeout_s)
        try:
            client.connect()
        except RegistrationError as exc:
            _LOG.warning("device plugin for %s refused: %s", resource, exc)
            context.abort(grpc.StatusCode.UNKNOWN, str(exc))
        with self._lock:
            self._clients = [c for c in self._clients if c.socket_path != client.socket_path] + [client]
            self.registrations.append(resource)
        client.run()
        return api_pb2.Empty()
