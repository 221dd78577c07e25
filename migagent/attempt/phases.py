"""How one reconcile of the node ends, and the agent-level phases it runs through, as data.

The agent flow is linear with one loop (a label superseded mid-change goes back to OBSERVE), so
the phases are an ordered enum, not a second state machine: `ORDER` is the order they start in
and `may_follow` says which phase may start after which. The values are metrics labels.
"""

from __future__ import annotations

import enum


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
    HELD = "held"
    """A failed attempt's retry time has not come and nothing it depends on changed: nothing was done."""
    STOPPED = "stopped"
    """The agent was asked to stop in the middle of an attempt (undone, or handed over to its successor)."""


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


ORDER: tuple[AgentPhase, ...] = tuple(p for p in AgentPhase if p is not AgentPhase.UNDO)
"""The forward order; UNDO runs instead of the rest when an attempt fails."""

SUPERSEDE_FROM: frozenset[AgentPhase] = frozenset(
    ORDER[ORDER.index(AgentPhase.DRAIN) : ORDER.index(AgentPhase.UNCORDON)]
)
"""A label changed at a safe point of these phases: OBSERVE and PLAN again, keeping the cordon."""


def may_follow(previous: AgentPhase | None, phase: AgentPhase) -> bool:
    """True when `phase` may start right after `previous` (None: the attempt's first phase).

    A phase may repeat (PLAN twice: plain, then with the pods per GI) or skip ahead (a node already
    applied stops after PLAN), and never goes back except by the supersede edge to OBSERVE."""
    if phase is AgentPhase.UNDO:
        return True
    if previous is None:
        return phase is AgentPhase.OBSERVE
    if previous is AgentPhase.UNDO:
        return False
    if phase is AgentPhase.OBSERVE and previous in SUPERSEDE_FROM:
        return True
    return ORDER.index(phase) >= ORDER.index(previous)


class PhaseOrderError(RuntimeError):
    """A phase started where `may_follow` forbids it: a fault in the attempt's own flow, never the node's."""


class PhaseOrder:
    """The phase an attempt is in, moved only as `may_follow` allows: the order is checked as the
    agent runs, so a flow that would, say, drain before it cordons fails before it drains."""

    def __init__(self) -> None:
        self.current: AgentPhase | None = None

    def enter(self, phase: AgentPhase) -> None:
        if not may_follow(self.current, phase):
            shown = self.current.value if self.current is not None else "the start"
            raise PhaseOrderError(f"phase {phase.value} cannot follow {shown}")
        self.current = phase
