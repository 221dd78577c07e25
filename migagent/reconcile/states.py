"""The phases of one apply, as data: an enum, the legal moves between phases, and what a restart does.

A phase is written to the journal with every record, so the table also says what a freshly started
engine does with a phase it finds there: RESUMABLE phases continue from the journal's step index,
RESTART_FROM_OBSERVE phases start again from a fresh observation (nothing they did is worth keeping).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from migagent.errors import MigAgentError


class Phase(enum.StrEnum):
    """Where one apply attempt stands. Each member carries a one-line docstring (`Phase.X.__doc__`)."""

    def __new__(cls, value: str, doc: str = "") -> Phase:
        member = str.__new__(cls, value)
        member._value_ = value
        member.__doc__ = doc
        return member

    IDLE = "idle", "No apply in progress (or one stopped on request before a GPU reset)."
    OBSERVING = "observing", "Reading the node through NVML."
    PLANNING = "planning", "Computing the steps from the observation and the desired layout."
    APPLYING = "applying", "Executing the plan's steps, one journaled step at a time."
    VERIFYING = "verifying", "Checking a fresh observation against the desired layout after the last step."
    REBOOT_REQUESTED = "reboot-requested", "A mode change needs a reboot (no GPU reset here); it was asked for."
    CONVERGED = "converged", "The node matches the desired layout."
    FAILED = "failed", "The attempt stopped with an error; the journal holds the reason and the next retry time."


TRANSITIONS: Mapping[Phase, frozenset[Phase]] = {
    Phase.IDLE: frozenset({Phase.OBSERVING}),
    # OBSERVING -> APPLYING: a journaled plan is resumed without planning again.
    Phase.OBSERVING: frozenset({Phase.PLANNING, Phase.APPLYING, Phase.FAILED}),
    Phase.PLANNING: frozenset({Phase.APPLYING, Phase.VERIFYING, Phase.FAILED}),
    # APPLYING -> OBSERVING: re-plan once when the node no longer matches the plan.
    Phase.APPLYING: frozenset({Phase.VERIFYING, Phase.OBSERVING, Phase.REBOOT_REQUESTED, Phase.IDLE, Phase.FAILED}),
    # VERIFYING -> OBSERVING: the node changed under us while applying; re-plan once.
    Phase.VERIFYING: frozenset({Phase.CONVERGED, Phase.OBSERVING, Phase.FAILED}),
    Phase.REBOOT_REQUESTED: frozenset({Phase.OBSERVING, Phase.FAILED}),
    Phase.CONVERGED: frozenset({Phase.IDLE, Phase.OBSERVING}),
    Phase.FAILED: frozenset({Phase.IDLE, Phase.OBSERVING}),
}

STABLE: frozenset[Phase] = frozenset({Phase.IDLE, Phase.CONVERGED, Phase.FAILED})
RESUMABLE: frozenset[Phase] = frozenset({Phase.APPLYING, Phase.REBOOT_REQUESTED})
RESTART_FROM_OBSERVE: frozenset[Phase] = frozenset({Phase.OBSERVING, Phase.PLANNING, Phase.VERIFYING})


class InvalidTransitionError(MigAgentError):
    """A phase change the table does not allow: a bug in the engine, never a node condition."""


def transition(current: Phase, target: Phase) -> Phase:
    """Return `target` if the table allows moving there from `current`, else raise."""
    if target not in TRANSITIONS[current]:
        allowed = ", ".join(sorted(p.value for p in TRANSITIONS[current]))
        raise InvalidTransitionError(
            f"illegal phase change {current.value} -> {target.value}; allowed from {current.value}: {allowed}"
        )
    return target
