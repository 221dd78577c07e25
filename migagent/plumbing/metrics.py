"""Prometheus metrics for the agent: a `MetricsListener` that records into a `CollectorRegistry`.

Every series is created up front, with every known label value, so that dashboards and alerts see
zeros instead of missing series before the first reconfiguration (a rate() over an absent series
is empty, not zero). The exposition format is prometheus_client's own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from migagent.attempt.phases import AgentPhase, Outcome

NAMESPACE = "migagent"

# Phases range from milliseconds (observe, plan) to many minutes (a drain blocked by a PDB until
# its timeout), so the buckets span 10 ms .. 1 h.
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)

# Waits on other actors (evicted pods leaving, the device plugin re-advertising) are seconds to
# minutes: the kubelet publishes node status every 10 s, eviction retries every 5 s.
WAIT_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0)

INSTANCE_ACTIONS = ("kept", "destroyed", "created")


class PrometheusMetrics:
    """Implements `migagent.attempt.listener.MetricsListener`; thread-safe like prometheus_client."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._reconciles = Counter(
            "reconciles",
            "Reconciles finished, by how they ended.",
            ["outcome"],
            namespace=NAMESPACE,
            registry=registry,
        )
        self._reconcile_duration = Histogram(
            "reconcile_duration_seconds",
            "Wall time of one reconcile, from observation to the final report.",
            namespace=NAMESPACE,
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self._phase_duration = Histogram(
            "phase_duration_seconds",
            "Wall time spent in each agent phase.",
            ["phase"],
            namespace=NAMESPACE,
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self._pods_evicted = Counter(
            "pods_evicted", "Pods evicted (or deleted) to free MIG devices.", namespace=NAMESPACE, registry=registry
        )
        self._gpu_instances = Counter(
            "gpu_instances",
            "GPU instances by what a reconfiguration did to them: kept, destroyed or created.",
            ["action"],
            namespace=NAMESPACE,
            registry=registry,
        )
        self._gpus_reset = Counter(
            "gpus_reset", "GPUs reset to apply a MIG mode change.", namespace=NAMESPACE, registry=registry
        )
        self._drain_wait = Histogram(
            "drain_wait_seconds",
            "Time spent waiting for evicted pods to leave the node.",
            namespace=NAMESPACE,
            buckets=WAIT_BUCKETS,
            registry=registry,
        )
        self._readvertise_wait = Histogram(
            "readvertise_wait_seconds",
            "Time from the device-plugin restart until Node allocatable matched the new layout.",
            namespace=NAMESPACE,
            buckets=WAIT_BUCKETS,
            registry=registry,
        )
        self._layout = _CurrentLayout()
        registry.register(self._layout)
        self._create_known_series()

    def _create_known_series(self) -> None:
        for outcome in Outcome:
            self._reconciles.labels(outcome=outcome.value)
        for phase in AgentPhase:
            self._phase_duration.labels(phase=phase.value)
        for action in INSTANCE_ACTIONS:
            self._gpu_instances.labels(action=action)

    def reconcile_finished(self, outcome: Outcome, duration_s: float) -> None:
        self._reconciles.labels(outcome=Outcome(outcome).value).inc()
        self._reconcile_duration.observe(_non_negative(duration_s))

    def phase_finished(self, phase: AgentPhase, duration_s: float) -> None:
        self._phase_duration.labels(phase=AgentPhase(phase).value).observe(_non_negative(duration_s))

    def pods_evicted(self, n: int) -> None:
        self._pods_evicted.inc(max(0, n))

    def instances_changed(self, kept: int, destroyed: int, created: int) -> None:
        for action, count in zip(INSTANCE_ACTIONS, (kept, destroyed, created), strict=True):
            self._gpu_instances.labels(action=action).inc(max(0, count))

    def gpus_reset(self, n: int) -> None:
        self._gpus_reset.inc(max(0, n))

    def drain_wait(self, seconds: float) -> None:
        self._drain_wait.observe(_non_negative(seconds))

    def readvertise_wait(self, seconds: float) -> None:
        self._readvertise_wait.observe(_non_negative(seconds))

    def layout_applied(self, name: str) -> None:
        self._layout.set(name)


class _CurrentLayout(Collector):
    """`migagent_layout_info{layout="<name>"} 1` for the layout last applied, and no sample before one is.

    prometheus_client's Info would expose an unlabelled `migagent_layout_info 1` before the first
    layout, and a labelled Gauge would need clear-then-set, which a scrape can see half done.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._name: str | None = None

    def set(self, name: str) -> None:
        with self._lock:
            self._name = name

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            f"{NAMESPACE}_layout_info", "The MIG layout last applied on this node (value 1).", labels=["layout"]
        )
        with self._lock:
            name = self._name
        if name is not None:
            family.add_metric([name], 1.0)
        return [family]


def _non_negative(seconds: float) -> float:
    # A fake or adjusted clock can produce a tiny negative difference; a histogram must not go down.
    return max(0.0, seconds)
