"""gRPC over unix sockets, as the kubelet's node-local APIs are served (PodResources, device plugins)."""

from __future__ import annotations

import os
from concurrent import futures
from pathlib import Path

import grpc

# sockaddr_un.sun_path is 108 bytes on Linux, one of them the terminating NUL.
MAX_UNIX_PATH_BYTES = 107


def check_socket_path(socket_path: str, what: str) -> None:
    """ValueError naming `what` when the path cannot be a unix socket address."""
    size = len(os.fsencode(socket_path))
    if size > MAX_UNIX_PATH_BYTES:
        raise ValueError(
            f"{what} socket path {socket_path} is {size} bytes; unix sockets allow at most"
            f" {MAX_UNIX_PATH_BYTES}: choose a shorter path"
        )


def new_server(max_workers: int, thread_name_prefix: str) -> grpc.Server:
    return grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=thread_name_prefix))


def start_on_unix_socket(server: grpc.Server, socket_path: str, what: str) -> None:
    """Bind `server` to `unix://socket_path` and start it. A socket file left by an earlier run is
    replaced (as the kubelet and NVIDIA's plugin do); any other file there is refused."""
    check_socket_path(socket_path, what)
    path = Path(socket_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_socket():
        path.unlink()
    elif path.exists():
        raise FileExistsError(f"{what} socket path {socket_path} exists and is not a socket; remove it first")
    if server.add_insecure_port(f"unix://{os.fspath(path)}") == 0:
        raise OSError(f"cannot bind the {what} server to unix://{socket_path}")
    server.start()


def unix_channel(socket_path: str) -> grpc.Channel:
    return grpc.insecure_channel(f"unix://{socket_path}")
