"""Composition helper for the CLI: metrics + health endpoints in one call.

health = HealthState(SystemClock())
metrics, stop = start_observability(args.metrics_port, args.metrics_address, health)
agent = Agent(..., listener=metrics)   # the agent calls health.heartbeat() / set_ready()
...
stop()
"""

from __future__ import annotations

import structlog
from prometheus_client import CollectorRegistry

from migagent.errors import PermanentError
from migagent.plumbing.health import HealthState, ObservabilityServer
from migagent.plumbing.metrics import PrometheusMetrics

log = structlog.get_logger("migagent.observability")


class MetricsServerError(PermanentError):
    """The metrics port cannot be served (in use, no such address): a setting to change, not a bug."""


def start_observability(port: int, address: str, health: HealthState) -> tuple[PrometheusMetrics, ObservabilityServer]:
    """Serve /metrics, /healthz and /readyz on address:port (0 picks a free port) in a daemon thread.

    Returns the metrics listener to hand to the agent and the server, which is the stop callable
    (`stop()`) and also tells the bound port (`.port`, `.url`), logged as `observability_serving`.
    A fresh registry (not prometheus_client's global one) keeps repeated starts in one process apart.
    """
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    try:
        server = ObservabilityServer(registry=registry, health=health, address=address, port=port)
    except OSError as exc:
        raise MetricsServerError(
            f"cannot serve metrics on {address}:{port}: {exc.strerror or exc}; choose another --metrics-port"
            " (0 picks a free one) or --metrics-address"
        ) from exc
    log.info("observability_serving", url=server.url, paths=["/metrics", "/healthz", "/readyz"])
    return metrics, server
