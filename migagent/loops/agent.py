"""The node agent's main loop: reconcile at start, on every label change, on every resync tick, and
on a failed node's retry time (exponential back-off, no label change needed).

A failed attempt's `RetryHold` is remembered here and handed to the next attempt, which does nothing
(HELD) before the retry time unless something it depends on changed (attempt.backoff): a resync
tick or a watch reconnect never starts an attempt early, whatever the timeouts and resync period.

`reconcile_once` runs one attempt (attempt.reconcile_node) and reports it to the metrics listener
and the health probe; `run` loops until its stop event is set. Everything the agent touches comes
in through `AgentPorts`, so tests and the demo run it against the simulator unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from migagent.attempt.backoff import RetryHold
from migagent.attempt.phases import AgentPhase, Outcome
from migagent.attempt.ports import AgentPorts, AgentSettings, DesiredSource, PhaseHook, ReconcileReport
from migagent.attempt.reconcile_node import NodeReconcile
from migagent.plumbing.health import HealthState
from migagent.plumbing.memory import release_free_memory

__all__ = ["Agent", "AgentPhase", "AgentPorts", "AgentSettings", "Outcome", "ReconcileReport"]

log = structlog.get_logger(__name__)

RELEASE_EVERY_S = 60.0
_IDLE = frozenset({Outcome.UNCHANGED, Outcome.HELD, Outcome.NO_DESIRED_LAYOUT})
"""Outcomes of an attempt that changed nothing on the node."""


class Agent:
    def __init__(
        self,
        ports: AgentPorts,
        settings: AgentSettings,
        *,
        source: DesiredSource | None = None,
        health: HealthState | None = None,
        phase_hook: PhaseHook | None = None,
        current_label: Callable[[], str | None] | None = None,
    ) -> None:
        """`phase_hook` is called as each phase starts (tests use it to stop an agent at a phase);
        `current_label` tells the layout the Node's label names now (a change mid-attempt re-plans)."""
        self._current_label = current_label
        self._ports = ports
        self._settings = settings
        self._source = source
        self._health = health
        self._phase_hook = phase_hook
        self._retry_at: float | None = None
        self._hold: RetryHold | None = None
        self._failures = 0
        self._last_finished = ports.clock.monotonic()
        self._released_at: float | None = None
        self.last_report: ReconcileReport | None = None
        self.reconciles = 0

    @property
    def retry_in_s(self) -> float | None:
        """Seconds until a failed node is tried again (None: no retry scheduled)."""
        if self._retry_at is None:
            return None
        return max(0.0, self._retry_at - self._ports.clock.monotonic())

    def _phase_started(self, phase: AgentPhase) -> None:
        # A reconcile can run for many minutes (drain, plugin restart, re-advertisement); a heartbeat
        # at each phase keeps liveness from killing the agent in the middle of a change.
        if self._health is not None:
            self._health.heartbeat()
        if self._phase_hook is not None:
            self._phase_hook(phase)

    def reconcile_once(self, stop: threading.Event | None = None) -> Outcome:
        clock = self._ports.clock
        started = clock.monotonic()
        report = NodeReconcile(
            self._ports,
            self._settings,
            stop=stop,
            phase_hook=self._phase_started,
            current_label=self._current_label,
            heartbeat=self._health.heartbeat if self._health is not None else None,
            hold=self._hold,
            may_write=self._may_write,
            node_from_watch=self._node_from_watch(),
        ).run()
        duration = clock.monotonic() - started
        self.last_report = report
        self.reconciles += 1
        self._ports.listener.reconcile_finished(report.outcome, duration)
        self._schedule_retry(report)
        self._report_health(report)
        log.info(
            "reconcile_finished",
            node=self._ports.api.node_name,
            outcome=report.outcome.value,
            attempt=report.attempt,
            duration_s=round(duration, 3),
            error=report.error,
            retry_in_s=self.retry_in_s,
        )
        return report.outcome

    def run(self, stop: threading.Event) -> None:
        """Reconcile at start, then whenever something is due, until `stop` is set.

        With a source, "at start" is its first read of the node (one reconcile, not two); while the
        API server is unreachable there is nothing to reconcile against anyway."""
        due = self._source is None
        while not stop.is_set():
            if due or self._retry_due():
                self._release_memory(self.reconcile_once(stop))
            if self._health is not None:
                self._health.heartbeat()
            due = self._wait(stop)
        log.info("agent_stopped", node=self._ports.api.node_name)

    def _release_memory(self, outcome: Outcome) -> None:
        """Idle at what it holds, not at the attempt's high-water mark: after an attempt that changed
        something, and at most every RELEASE_EVERY_S after idle re-checks (a full collection costs
        ~0.1 s of CPU; a pool's agents share one process and re-check every fraction of a second)."""
        now = self._ports.clock.monotonic()
        if outcome in _IDLE and self._released_at is not None and now - self._released_at < RELEASE_EVERY_S:
            return
        release_free_memory()
        self._released_at = now

    def _may_write(self) -> bool:
        """Whether an attempt may write now (loops.ownership: only while holding the node's Lease)."""
        return True

    def _node_from_watch(self) -> bool:
        """Whether the next attempt may take the Node from the watch (loops.ownership says when)."""
        return False

    # -- scheduling -----------------------------------------------------------------------------

    def _wait(self, stop: threading.Event) -> bool:
        """Wait for a label change, a resync tick, a retry or the heartbeat; True if a reconcile is due."""
        timeout = self._settings.heartbeat_s
        if self.retry_in_s is not None:
            timeout = min(timeout, self.retry_in_s)
        if self._source is not None:
            return self._source.wait(stop, timeout).due
        self._ports.clock.wait(stop, min(timeout, self._settings.resync_period_s))
        return self._retry_due() or self._resync_due()

    def _resync_due(self) -> bool:
        if self.last_report is None:
            return True
        return self._ports.clock.monotonic() - self._last_finished >= self._settings.resync_period_s

    def _retry_due(self) -> bool:
        return self._retry_at is not None and self._ports.clock.monotonic() >= self._retry_at

    def _schedule_retry(self, report: ReconcileReport) -> None:
        clock = self._ports.clock
        now = clock.monotonic()
        self._last_finished = now
        if report.outcome is Outcome.FAILED:
            self._failures = max(self._failures, report.attempt - 1) + 1
            self._hold = report.hold
        elif report.outcome is Outcome.HELD:
            self._hold = report.hold or self._hold  # a restarted agent learns its hold from the Node
        else:
            self._failures, self._hold, self._retry_at = 0, None, None
            return
        if self._hold is not None:
            self._retry_at = now + max(0.0, self._hold.at - clock.wall())
        else:  # the node could not even be read: no hold to keep, only a time
            self._retry_at = now + self._settings.retry.failure_delay(self._failures)

    def _report_health(self, report: ReconcileReport) -> None:
        if self._health is None:
            return
        self._health.heartbeat()
        if report.node_read:
            self._health.set_ready(True)
        else:
            self._health.set_ready(False, f"cannot read the node: {report.error}")
