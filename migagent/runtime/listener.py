"""What the agent tells observers (metrics, tests) about its work, as one small protocol.

The agent calls these hooks at fixed points of a reconcile; it never imports a metrics library.
`migagent.runtime.metrics` implements the protocol with Prometheus; `NullListener` ignores every call.
A listener must not raise and must return quickly: it runs on the agent's thread.
"""

from __future__ import annotations

import enum
from typing import Protocol


class Outcome(enum.StrEnum):
    """How one reconcile ended. The value is what metrics use as a label."""

    APPLIED = "applied"
    """The node was reconfigured and now matches the desired layout."""
    UNCHANGED = "unchanged"
    """The node already matched (GPUs and advertisement); nothing was touched."""
    NO_DESIRED_LAYOUT = "no-desired-layout"
    """The node carries no `nvidia.com/mig.config` label; nothing to do."""
    REBOOTING = "rebooting"
    """A mode change needs a reboot, which was requested; the agent resumes after it."""
    FAILED = "failed"
    """The attempt failed and was undone; a retry is scheduled."""
    STOPPED = "stopped"
    """The agent was asked to stop in the middle of an attempt."""


class AgentPhase(enum.StrEnum):
    """The agent-level phases of one reconcile, in the order they run (the value is a metrics label)."""

    OBSERVE = "observe"
    PLAN = "plan"
    CORDON = "cordon"
    PAUSE = "pause"
    DRAIN = "drain"
    APPLY = "apply"
    RESTART_PLUGIN = "restart-plugin"
    READVERTISE = "readvertise"
    UNCORDON = "uncordon"
    UNDO = "undo"


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
