"""Liveness and readiness of the agent, and the HTTP server that exposes them with /metrics.

- /healthz (liveness): the main loop has called `heartbeat()` within `stale_after_s`, and every added
  liveness check (the label watch thread's) passes. A loop that stopped beating is stuck (a hung
  call, a deadlock); the kubelet restarts the container. The reconcile beats at every safe point
  (phase, NVML step, drain and device-plugin poll), so a reconcile stuck in one place fails it too.
- /readyz (readiness): the agent said `set_ready(True)` (after its first observation of the node)
  and is alive. The agent says `set_ready(False)` while it is wedged (e.g. the node cannot be read).
- /metrics: prometheus_client's own exposition of the given registry.

The server is stdlib `http.server` in a daemon thread, so it needs no event loop and never blocks the
agent. Time comes from the `Clock` seam so tests can make a heartbeat stale without sleeping.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import MetricsHandler

from migagent.clock import Clock

# The agent's longest blocking waits (a drain until its timeout, the device-plugin re-advertisement)
# run for minutes between heartbeats; liveness must not kill it in the middle of one.
DEFAULT_STALE_AFTER_S = 900.0


LivenessCheck = Callable[[], str | None]


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str


class HealthState:
    """What the agent tells the probes. Thread-safe: the agent writes, server threads read."""

    def __init__(self, clock: Clock, *, stale_after_s: float = DEFAULT_STALE_AFTER_S) -> None:
        if stale_after_s <= 0:
            raise ValueError(f"stale_after_s must be positive seconds, got {stale_after_s}")
        self._clock = clock
        self._stale_after_s = stale_after_s
        self._lock = threading.Lock()
        # Starting counts as a beat: the process is alive until the loop has had time to run.
        self._last_beat = clock.monotonic()
        self._ready = False
        self._not_ready_reason = "the agent has not observed the node yet"
        self._checks: list[LivenessCheck] = []
        self._readiness_checks: list[LivenessCheck] = []

    def add_liveness_check(self, check: LivenessCheck) -> None:
        """`check()` returns why the process is stuck (liveness fails with that text), or None."""
        with self._lock:
            self._checks.append(check)

    def heartbeat(self) -> None:
        now = self._clock.monotonic()
        with self._lock:
            self._last_beat = now

    def add_readiness_check(self, check: LivenessCheck) -> None:
        """`check()` returns why the agent cannot do its job now (readiness fails with that text), or None."""
        with self._lock:
            self._readiness_checks.append(check)

    def set_ready(self, ready: bool, reason: str = "") -> None:
        """`reason` says why the agent is not ready (shown in the /readyz body); ignored when ready."""
        with self._lock:
            self._ready = ready
            self._not_ready_reason = "" if ready else (reason or "the agent reported itself not ready")

    def liveness(self) -> Verdict:
        with self._lock:
            age = self._clock.monotonic() - self._last_beat
        if age > self._stale_after_s:
            return Verdict(False, f"main loop heartbeat is {age:.0f}s old (limit {self._stale_after_s:.0f}s)")
        with self._lock:
            checks = list(self._checks)
        for check in checks:
            stuck = check()
            if stuck is not None:
                return Verdict(False, stuck)
        return Verdict(True, "ok")

    def readiness(self) -> Verdict:
        alive = self.liveness()
        if not alive.ok:
            return alive
        with self._lock:
            checks = list(self._readiness_checks)
            ready, not_ready_reason = self._ready, self._not_ready_reason
        for check in checks:
            problem = check()
            if problem is not None:
                return Verdict(False, problem)
        if not ready:
            return Verdict(False, not_ready_reason)
        return Verdict(True, "ok")


class _Handler(MetricsHandler):
    """Routes /healthz and /readyz to the health state and /metrics to prometheus_client."""

    health: HealthState

    def do_GET(self) -> None:  # noqa: N802 - the name http.server dispatches GET requests to
        path = urlsplit(self.path).path
        if path == "/metrics":
            super().do_GET()
        elif path == "/healthz":
            self._send_verdict(self.health.liveness())
        elif path == "/readyz":
            self._send_verdict(self.health.readiness())
        else:
            self._send_text(404, "not found: try /metrics, /healthz or /readyz\n")

    def _send_verdict(self, verdict: Verdict) -> None:
        self._send_text(200 if verdict.ok else 503, verdict.reason + "\n")

    def _send_text(self, status: int, text: str) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a slow scraper must not keep the process alive at exit


class _Server6(_Server):
    address_family = socket.AF_INET6


class ObservabilityServer:
    """A running /metrics + /healthz + /readyz server; calling it (or `stop()`) shuts it down."""

    def __init__(self, *, registry: CollectorRegistry, health: HealthState, address: str, port: int) -> None:
        handler = type("MigagentHandler", (_Handler,), {"registry": registry, "health": health})
        server_class = _Server6 if ":" in address else _Server
        self._server = server_class((address, port), handler)
        self._stopped = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="migagent-observability", daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked for)."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}"

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __call__(self) -> None:
        self.stop()
