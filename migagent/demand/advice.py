"""The advice as a value: per node the change and its price, per pending pod where it would run (or
why it cannot), the totals, and (with --generate) the layouts written for the advice."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from migagent.rollout.impact import NodeImpact


@dataclass(frozen=True)
class NodeAdvice:
    node: str
    layout: str | None
    """Its `nvidia.com/mig.config` now."""
    target: str | None = None
    """The layout to change it to; None: leave it as it is."""
    impact: NodeImpact | None = None
    """The change's price, as `migagent rollout plan` prints it (None when unchanged)."""
    serves: tuple[str, ...] = ()
    """Pending pods that would run here (after the change when there is one)."""
    not_changed: str = ""
    """Why the node may not be changed now (no agent report, a change under way, cordoned, ...)."""

    @property
    def changes(self) -> bool:
        return self.target is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "layout": self.layout,
            "target": self.target,
            "serves": list(self.serves),
            "not_changed": self.not_changed,
            "impact": self.impact.to_json() if self.impact is not None else None,
        }


@dataclass(frozen=True)
class PodAdvice:
    pod: str
    priority: int
    requests: Mapping[str, int] = field(default_factory=dict, hash=False)
    node: str | None = None
    """Where it would run; None: unserved."""
    after_change: bool = False
    """It runs there only once the node has changed (else: it fits there now)."""
    reason: str = ""
    """Unserved: why (one line)."""
    waited_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "priority": self.priority,
            "requests": dict(self.requests),
            "node": self.node,
            "after_change": self.after_change,
            "reason": self.reason,
            "waited_s": round(self.waited_s, 1),
        }


@dataclass(frozen=True)
class Advice:
    nodes: tuple[NodeAdvice, ...] = ()
    pods: tuple[PodAdvice, ...] = ()
    generated: Mapping[str, Any] | None = field(default=None, hash=False)
    """With --generate: the mig-parted v1 document of the layouts written for this advice."""

    @property
    def changes(self) -> dict[str, str]:
        """Node -> the layout it moves to."""
        return {n.node: n.target for n in self.nodes if n.target is not None}

    def node(self, name: str) -> NodeAdvice | None:
        return next((n for n in self.nodes if n.node == name), None)

    def pod(self, name: str) -> PodAdvice | None:
        return next((p for p in self.pods if p.pod == name), None)

    def totals(self) -> dict[str, int]:
        changed = [n.impact for n in self.nodes if n.impact is not None and n.target is not None]
        return {
            "pending": len(self.pods),
            "served_now": sum(1 for p in self.pods if p.node is not None and not p.after_change),
            "served_after_changes": sum(1 for p in self.pods if p.node is not None and p.after_change),
            "unserved": sum(1 for p in self.pods if p.node is None),
            "nodes_changed": len(changed),
            "gpus_changed": sum(len(i.gpus_changed) for i in changed),
            "gis_destroyed": sum(i.gis_destroyed for i in changed),
            "gis_created": sum(i.gis_created for i in changed),
            "resets": sum(i.resets for i in changed),
            "pods_evicted": sum(len(i.evicts) for i in changed),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": [n.to_json() for n in self.nodes],
            "pods": [p.to_json() for p in self.pods],
            "totals": self.totals(),
            "generated_layouts": dict(self.generated) if self.generated is not None else None,
        }
