"""The rollout's state, as kept in its one object in the cluster (a ConfigMap, JSON).

Everything a driver needs to resume lives here: the spec it was started with (selector, layout,
budgets, the layout file itself), each node's status with its previous layout and the target it
is relabelled to, the wave it went in, predicted and actual evictions, and who drives it now (a
holder with a lease-like expiry, so two drivers never both drive it). A node is marked in flight
in this object before its label is changed, so a driver killed in between relabels it once, later.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field, replace
from typing import Any

from migagent.layout.parse import parse_layout
from migagent.layout.spec import LayoutFile
from migagent.rollout.spec import RolloutSpec


class NodeStatus(enum.StrEnum):
    PENDING = "pending"
    """In scope, not relabelled yet."""
    IN_FLIGHT = "in-flight"
    """Relabelled (or about to be): out of service until its agent reports success."""
    DONE = "done"
    """Its agent reports success with the target layout (or it already had it)."""
    FAILED = "failed"
    """Its agent reports failed for the target layout; counted against --failure-budget."""
    SKIPPED = "skipped"
    """Cannot be changed: no agent report, or the layout does not fit it (reason says which)."""
    OVERRIDDEN = "overridden"
    """Its `nvidia.com/mig.config` was changed by someone else while the rollout had it in scope: that is
    their decision, so the rollout leaves the node alone and `undo` never changes its label."""


class Phase(enum.StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    """`rollout pause`: no new wave starts; nodes in flight finish."""
    HALTED = "halted"
    """The failure budget is spent; `rollout resume` (or `start`) retries after the fault is cleared."""
    DONE = "done"


class Mode(enum.StrEnum):
    ROLLOUT = "rollout"
    UNDO = "undo"


@dataclass(frozen=True)
class Layouts:
    """The layout file (mig-parted YAML) the rollout predicts with, as it was when it started: the text
    kept in the state object, parsed once."""

    text: str
    file: LayoutFile = field(compare=False)

    @classmethod
    def parse(cls, text: str, *, source: str) -> Layouts:
        return cls(text, parse_layout(text, source=source))


@dataclass(frozen=True)
class NodeRecord:
    node: str
    status: NodeStatus
    target: str | None
    """The layout label it is moved to (None: the label is removed, an undo to "no layout")."""
    previous: str | None
    """Its `nvidia.com/mig.config` before this rollout first changed it."""
    gpus: int = 0
    wave: int | None = None
    predicted: tuple[str, ...] = ()
    """Pods the change was predicted to evict, when its wave was chosen."""
    pods_before: tuple[str, ...] = ()
    """GPU pods on the node when it was relabelled: those gone since are the actual evictions."""
    evicted: tuple[str, ...] = ()
    started_at: float | None = None
    finished_at: float | None = None
    reason: str = ""
    stale_attempt: str | None = None
    """The attempt number in the node's `migagent.io/attempt` when a resumed driver first looked (failed
    or in flight): a `failed` with that same attempt is the old failure, not a new one."""
    labelled: bool = False
    """The rollout has set the node's label to `target` (recorded once the write is seen): from then on
    a label other than `target` is someone else's."""

    def to_json(self) -> dict[str, Any]:
        return {
            "status": str(self.status),
            "target": self.target,
            "previous": self.previous,
            "gpus": self.gpus,
            "wave": self.wave,
            "predicted": list(self.predicted),
            "pods_before": list(self.pods_before),
            "evicted": list(self.evicted),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "reason": self.reason,
            "stale_attempt": self.stale_attempt,
            "labelled": self.labelled,
        }


@dataclass(frozen=True)
class RolloutState:
    name: str
    spec: RolloutSpec
    layouts: Layouts
    phase: Phase = Phase.RUNNING
    mode: Mode = Mode.ROLLOUT
    nodes: dict[str, NodeRecord] = field(default_factory=dict, hash=False)
    waves: int = 0
    canary_done_at: float | None = None
    holder: str | None = None
    holder_expires: float = 0.0
    reasons: tuple[str, ...] = ()
    """Why it halted (one line per failed node), or why no wave can start now."""
    resource_version: str = ""
    """Of the object it was read from: the precondition of the next write (not stored in it)."""

    def with_node(self, record: NodeRecord) -> RolloutState:
        return replace(self, nodes={**self.nodes, record.node: record})

    def in_status(self, *statuses: NodeStatus) -> list[NodeRecord]:
        return [r for name, r in sorted(self.nodes.items()) if r.status in statuses]

    def held_by_other(self, holder: str, now: float) -> bool:
        return self.holder is not None and self.holder != holder and self.holder_expires > now

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "spec": self.spec.to_json(),
            "phase": str(self.phase),
            "mode": str(self.mode),
            "nodes": {name: record.to_json() for name, record in sorted(self.nodes.items())},
            "waves": self.waves,
            "canary_done_at": self.canary_done_at,
            "holder": self.holder,
            "holder_expires": self.holder_expires,
            "reasons": list(self.reasons),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
