"""One reconfiguration attempt's memory: what it did that must be undone, and how it is recorded.

Every change an attempt makes to the node outside the GPUs (a cordon, paused GPU Operator labels)
pushes its inverse on the attempt's `UndoStack`; a failure unwinds the stack in reverse order.
The stack lives in the attempt object, never in module state, so a later attempt cannot inherit a
stale "already restored" flag (mig-manager's package-level flags do exactly that).

The same facts are also readable on the Node, so an agent that was killed mid-attempt can finish
the job: the cordon carries `migagent.io/cordoned-by-migagent`, paused labels carry the value
`paused-for-mig-change`, and `migagent.io/attempt` holds the attempt number and layout.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from migagent.attempt.advertise.wait import AdvertisementTimeoutError
from migagent.attempt.blockers import PluginStillNotPausedError
from migagent.attempt.preflight import OtherMigOwnerError, StrategyMismatchError
from migagent.attempt.window.deviceplugin import ComponentsNotPausedError
from migagent.errors import (
    DrainBlockedError,
    InvalidLayoutError,
    LayoutDoesNotFitError,
    LayoutSelectsNoGpuError,
    MigAgentError,
    ResetRequiredError,
    StorageError,
)
from migagent.jsontext import decode_json
from migagent.node.names import ConditionReason

log = structlog.get_logger(__name__)


class StopRequested(MigAgentError):  # noqa: N818 - a request, not an error condition
    """The agent was asked to stop between two phases; the attempt is undone and not reported failed."""


class ApplyFailedError(MigAgentError):
    """The apply engine ended the attempt with FAILED (its journal holds the detail)."""


UndoAction = Callable[[], object]


@dataclass
class _Entry:
    name: str
    action: UndoAction


class UndoStack:
    """Named inverse actions, run last-in first-out. Pushing a name again replaces its action in place."""

    def __init__(self) -> None:
        self._entries: list[_Entry] = []

    def push(self, name: str, action: UndoAction) -> None:
        for entry in self._entries:
            if entry.name == name:
                entry.action = action
                return
        self._entries.append(_Entry(name, action))

    def pop(self, name: str) -> None:
        """The forward path did this inverse itself (uncordoned on success): nothing left to undo."""
        self._entries = [entry for entry in self._entries if entry.name != name]

    def run(self, name: str) -> None:
        """Run one inverse now and forget it; the others stay (raises what the action raises)."""
        for entry in self._entries:
            if entry.name == name:
                entry.action()
                self.pop(name)
                return

    def __contains__(self, name: object) -> bool:
        return any(entry.name == name for entry in self._entries)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(entry.name for entry in self._entries)

    def unwind(self) -> tuple[str, ...]:
        """Run every action in reverse order, continuing past failures; returns what failed and why."""
        failures: list[str] = []
        while self._entries:
            entry = self._entries.pop()
            try:
                entry.action()
                log.info("undo_done", action=entry.name)
            except Exception as exc:  # one failed undo must not stop the others
                log.error("undo_failed", action=entry.name, error=str(exc))
                failures.append(f"{entry.name}: {exc}")
        return tuple(failures)


@dataclass(frozen=True)
class AttemptMarker:
    """The `migagent.io/attempt` annotation: JSON while an attempt runs, a bare count after a failure."""

    number: int
    layout: str | None = None
    started_at: float | None = None

    def to_annotation(self) -> str:
        return json.dumps({"attempt": self.number, "layout": self.layout, "startedAt": self.started_at}, sort_keys=True)

    @classmethod
    def from_annotation(cls, text: str | None) -> AttemptMarker | None:
        if not text:
            return None
        try:
            data = decode_json(text)
        except ValueError:
            return None
        if isinstance(data, int):
            return cls(number=data)
        if isinstance(data, dict) and isinstance(data.get("attempt"), int):
            layout = data.get("layout")
            started = data.get("startedAt")
            return cls(
                number=data["attempt"],
                layout=layout if isinstance(layout, str) else None,
                started_at=float(started) if isinstance(started, int | float) else None,
            )
        return None


_REASONS: tuple[tuple[type[BaseException], ConditionReason], ...] = (
    (DrainBlockedError, ConditionReason.DRAIN_BLOCKED),
    (LayoutDoesNotFitError, ConditionReason.LAYOUT_DOES_NOT_FIT),
    (LayoutSelectsNoGpuError, ConditionReason.LAYOUT_SELECTS_NO_GPU),  # before its base, InvalidLayoutError
    (InvalidLayoutError, ConditionReason.INVALID_LAYOUT),
    (ResetRequiredError, ConditionReason.REBOOT_REQUIRED),
    (AdvertisementTimeoutError, ConditionReason.WAITING_FOR_DEVICE_PLUGIN),
    (ComponentsNotPausedError, ConditionReason.DEVICE_PLUGIN_NOT_PAUSED),
    (PluginStillNotPausedError, ConditionReason.DEVICE_PLUGIN_NOT_PAUSED),
    (StorageError, ConditionReason.STORAGE_UNWRITABLE),
    (OtherMigOwnerError, ConditionReason.OTHER_MIG_OWNER),
    (StrategyMismatchError, ConditionReason.STRATEGY_MISMATCH),
)


def failure_reason(error: BaseException) -> ConditionReason:
    """The condition reason a failed attempt reports; anything unclassified is ApplyFailed."""
    for error_type, reason in _REASONS:
        if isinstance(error, error_type):
            return reason
    return ConditionReason.APPLY_FAILED
