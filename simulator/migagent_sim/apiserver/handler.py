"""The HTTP/1.1 side: parse, fault-inject, dispatch, answer (Content-Length or chunked watch), record."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from migagent_sim.apiserver.dispatch import ApiRequest, EventSource, JsonResponse
from migagent_sim.apiserver.errors import ApiError
from migagent_sim.apiserver.faults import RecordedRequest
from migagent_sim.apiserver.routing import parse_route, rbac_verb
from migagent_sim.apiserver.watch import WatchEnd

if TYPE_CHECKING:
    from migagent_sim.apiserver.server import ServerContext

JsonDict = dict[str, Any]
_LOG = logging.getLogger(__name__)


class ApiRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and chunked watch bodies the client can read as they come
    server_version = "migagent-fake-apiserver"
    # Headers and body go out in two writes; with Nagle on, the body waits ~40 ms for the client's
    # delayed ACK on every request (loopback included).
    disable_nagle_algorithm = True
    context: ServerContext  # set on the subclass the server creates

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        _LOG.debug("fake apiserver: " + format, *args)

    def _serve(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        route = parse_route(path)
        request = ApiRequest(self.command, path, route, query, body, self.headers.get("Content-Type"))
        self._answer(request)

    def _record(self, request: ApiRequest, status: int) -> None:
        # Recorded before the body goes out, so an open watch is already visible in the log.
        route = request.route
        self.context.requests.record(
            RecordedRequest(
                method=request.method,
                path=request.path,
                query=request.query,
                verb=rbac_verb(request.method, route, request.query),
                resource=route.plural,
                subresource=route.subresource,
                namespace=route.namespace,
                name=route.name,
                status=status,
                api_group=route.group,
            )
        )

    def _answer(self, request: ApiRequest) -> None:
        try:
            if self.context.access is not None:  # authentication and authorization come first
                request = self.context.access.check_request(request, self.headers.get("Authorization"))
            fault = self.context.faults.take(request.method, request.path, request.route)
            if fault is not None:
                raise fault
            outcome = self.context.dispatcher.handle(request)
        except ApiError as error:
            outcome = JsonResponse(error.code, error.status_body(), error.headers())
        except Exception:
            _LOG.exception("fake apiserver failed on %s %s", request.method, request.path)
            failure = ApiError(500, f"Internal error occurred: the fake apiserver failed on {request.path}")
            outcome = JsonResponse(500, failure.status_body())
        if isinstance(outcome, JsonResponse):
            self._record(request, outcome.status)
            self._send_json(outcome)
        else:
            self._record(request, 200)
            self._stream(outcome)

    def _send_json(self, response: JsonResponse) -> None:
        payload = json.dumps(response.body).encode()
        self.send_response(response.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, source: EventSource) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            end = source.run(self._write_chunk)
        except OSError:  # the client went away; nothing more to say on this connection
            self.close_connection = True
            return
        finally:
            source.close()
        if end is WatchEnd.DROPPED:
            self._drop_connection()
            return
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client left as the stream ended (an agent process killed, say)
            self.close_connection = True

    def _write_chunk(self, event: JsonDict) -> None:
        line = json.dumps(event).encode() + b"\n"  # one event per chunk, each a complete line
        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
        self.wfile.flush()

    def _drop_connection(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


class LoopbackHttpServer(ThreadingHTTPServer):
    """A threading server on an ephemeral 127.0.0.1 port that can close its idle keep-alive connections."""

    daemon_threads = True

    def __init__(self, handler: type[ApiRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Wake handler threads idling on keep-alive connections so they exit."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
