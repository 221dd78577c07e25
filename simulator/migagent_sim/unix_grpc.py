"""gRPC over unix sockets, as the kubelet's node-local APIs are served (PodResources, device plugins)."""

from __future__ import annotations

import os
from concurrent import futures
from pathlib import Path

import grpc

from migagent.errors import UsageError

# sockaddr_un.sun_path is 108 bytes on Linux, one of them the terminating NUL.
MAX_UNIX_PATH_BYTES = 107


class SocketPathTooLongError(UsageError, ValueError):
    """A simulated node's socket cannot live where it was asked to: a setting (most often TMPDIR, under
    which the demo and the simulator make their folders), so a one-line refusal, not an internal error."""


def check_socket_path(socket_path: str, what: str) -> None:
    """SocketPathTooLongError naming `what` when the path cannot be a unix socket address."""
    size = len(os.fsencode(socket_path))
    if size > MAX_UNIX_PATH_BYTES:
        raise SocketPathTooLongError(
            f"{what} socket path {socket_path} is {size} bytes; unix sockets allow at most"
            f" {MAX_UNIX_PATH_BYTES}: choose a shorter path (a shorter TMPDIR, where it is under TMPDIR)"
        )


class UnixServer:
    """A gRPC server with its own worker threads; `stop` ends both (gRPC leaves an executor it was given running)."""

    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        self._executor = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self.grpc = grpc.server(self._executor)

    def start(self, socket_path: str, what: str) -> None:
        """Bind to `unix://socket_path` and start. A socket file left by an earlier run is replaced (as
        the kubelet and NVIDIA's plugin do); any other file there is refused."""
        check_socket_path(socket_path, what)
        path = Path(socket_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_socket():
            path.unlink()
        elif path.exists():
            raise FileExistsError(f"{what} socket path {socket_path} exists and is not a socket; remove it first")
        if self.grpc.add_insecure_port(f"unix://{os.fspath(path)}") == 0:
            raise OSError(f"cannot bind the {what} server to unix://{socket_path}")
        self.grpc.start()

    def stop(self, grace: float | None) -> None:
        self.grpc.stop(grace).wait()
        self._executor.shutdown(wait=True)


def unix_channel(socket_path: str) -> grpc.Channel:
    return grpc.insecure_channel(f"unix://{socket_path}")
