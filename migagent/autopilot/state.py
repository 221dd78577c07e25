"""The autopilot's state, kept in its one object in the cluster (ConfigMap migagent-autopilot, JSON):
the pause switch, the changes it made (for the per-pool hourly limit and the per-node cool-down),
the rollout it drives, and its history of decisions (the newest `HISTORY_KEPT`)."""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from migagent.errors import PermanentError
from migagent.jsontext import decode_json

HISTORY_KEPT = 200
CHANGES_KEPT_S = 7 * 24 * 3600.0
"""Changes older than this are dropped (longer than any sensible cool-down)."""


class CorruptAutopilotStateError(PermanentError):
    """The autopilot's object cannot be read as its state: names the object, what is wrong, how to repair it."""


class Verdict(enum.StrEnum):
    CHANGED = "changed"
    """A rollout was started for these nodes."""
    DRY_RUN = "dry-run"
    """It would have started one (--dry-run)."""
    HELD = "held"
    """A change would serve waiting pods, but a guardrail holds it (pause, hourly limit, cool-down...)."""
    NO_CHANGE = "no-change"
    """Pods wait, and no allowed change serves them (the reasons say why)."""
    ROLLOUT_DONE = "rollout-done"
    ROLLOUT_HALTED = "rollout-halted"


@dataclass(frozen=True)
class Change:
    node: str
    pool: str
    at: float
    layout: str
    previous: str | None


@dataclass(frozen=True)
class Decision:
    at: float
    verdict: Verdict
    reasons: tuple[str, ...] = ()
    nodes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)
    """Per node: from, to, the pods it serves, the pods it evicts, GPUs changed (what the Event says)."""
    rollout: str | None = None
    waiting: int = 0
    """Pods that had waited long enough to count as demand."""

    def signature(self) -> tuple[object, ...]:
        """What makes a decision new: a repeat of the last one is not recorded again."""
        targets = tuple(sorted((n, str(v.get("to"))) for n, v in self.nodes.items()))
        return (self.verdict, self.reasons, targets, self.rollout)

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "verdict": str(self.verdict),
            "reasons": list(self.reasons),
            "nodes": {name: dict(value) for name, value in sorted(self.nodes.items())},
            "rollout": self.rollout,
            "waiting": self.waiting,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Decision:
        return cls(
            at=float(data["at"]), verdict=Verdict(data["verdict"]), reasons=tuple(data.get("reasons") or ()),
            nodes={str(k): dict(v) for k, v in (data.get("nodes") or {}).items()},
            rollout=data.get("rollout"), waiting=int(data.get("waiting", 0)),
        )


@dataclass(frozen=True)
class AutopilotState:
    paused: bool = False
    rollout: str | None = None
    """The rollout it started and still drives (None: none in flight)."""
    changes: tuple[Change, ...] = ()
    history: tuple[Decision, ...] = ()
    resource_version: str = ""
    """Of the object it was read from ("" before it exists); not stored."""

    def record(self, decision: Decision) -> AutopilotState:
        """With `decision` in the history, unless it repeats the last one."""
        if self.history and self.history[-1].signature() == decision.signature():
            return self
        return replace(self, history=(*self.history, decision)[-HISTORY_KEPT:])

    def with_changes(self, changes: tuple[Change, ...], now: float) -> AutopilotState:
        kept = tuple(c for c in (*self.changes, *changes) if now - c.at < CHANGES_KEPT_S)
        return replace(self, changes=kept)

    def last_change(self, node: str) -> Change | None:
        return next((c for c in reversed(self.changes) if c.node == node), None)

    def changes_since(self, pool: str, since: float) -> int:
        return sum(1 for c in self.changes if c.pool == pool and c.at > since)

    def dumps(self) -> str:
        return json.dumps({
            "paused": self.paused,
            "rollout": self.rollout,
            "changes": [c.__dict__ for c in self.changes],
            "history": [d.to_json() for d in self.history],
        }, sort_keys=True, separators=(",", ":"))

    @classmethod
    def loads(cls, text: str, *, resource_version: str) -> AutopilotState:
        data = decode_json(text) if text else {}
        return cls(
            paused=bool(data.get("paused", False)),
            rollout=data.get("rollout"),
            changes=tuple(Change(**c) for c in data.get("changes") or ()),
            history=tuple(Decision.from_json(d) for d in data.get("history") or ()),
            resource_version=resource_version,
        )
