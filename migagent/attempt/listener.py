"""What the agent tells observers (metrics, tests) about its work, as one small protocol.

The agent calls these hooks at fixed points of a reconcile; it never imports a metrics library.
`migagent.plumbing.metrics` implements the protocol with Prometheus; `NullListener` ignores every call.
A listener must not raise and must return quickly: it runs on the agent's thread.
"""

from __future__ import annotations

from typing import Protocol

from migagent.attempt.phases import AgentPhase, Outcome

__all__ = ["AgentPhase", "MetricsListener", "NullListener", "Outcome"]


class MetricsListener(Protocol):
    def reconcile_finished(self, outcome: Outcome, duration_s: float) -> None: ...

    def phase_finished(self, phase: AgentPhase, duration_s: float) -> None: ...

    def pods_evicted(self, n: int) -> None: ...

    def instances_changed(self, kept: int, destroyed: int, created: int) -> None: ...

    def gpus_reset(self, n: int) -> None: ...

    def drain_wait(self, seconds: float) -> None: ...

    def readvertise_wait(self, seconds: float) -> None: ...

    def layout_applied(self, name: str) -> None: ...


class NullListener:
    """A listener that ignores everything (the default when metrics are off)."""

    def reconcile_finished(self, outcome: Outcome, duration_s: float) -> None:
        pass

    def phase_finished(self, phase: AgentPhase, duration_s: float) -> None:
        pass

    def pods_evicted(self, n: int) -> None:
        pass

    def instances_changed(self, kept: int, destroyed: int, created: int) -> None:
        pass

    def gpus_reset(self, n: int) -> None:
        pass

    def drain_wait(self, seconds: float) -> None:
        pass

    def readvertise_wait(self, seconds: float) -> None:
        pass

    def layout_applied(self, name: str) -> None:
        pass
