"""A TCP server that accepts every connection, reads what is sent, and never answers a byte.

It stands for an API server wedged behind a load balancer: the connect succeeds, the request is
taken, and the response never comes. Without a request timeout a client waits on it forever.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType


class SilentServer:
    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self._stopping = threading.Event()
        self._held: list[socket.socket] = []
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, name="silent-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            self._held.append(connection)  # kept open, never written to

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stopping.set()
        self._thread.join(2.0)
        for connection in self._held:
            connection.close()
        self._listener.close()
