"""The back-off holds: a failed node is not tried again before its retry time, unless something the
failed attempt depended on has changed since.

What an attempt depends on: the label (kept apart, in the hold), the layout file's content, what the
GPUs hold (instances and the processes on them), the pods on the node that hold GPU devices, and
what the device plugin advertises. `depends_on` digests these; a failed attempt leaves a `RetryHold`
(its retry time, the label and the digest, how many attempts in a row failed, and the blockers it
met after its cordon: attempt.blockers) in the agent's
memory and on the Node (`migagent.io/next-retry`), so a resync tick, a watch reconnect or a
restarted agent all look at the same retry time: they start an attempt only once it has passed or
the digest differs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from migagent.attempt.blockers import Blocker
from migagent.attempt.undo import AttemptMarker
from migagent.jsontext import decode_json
from migagent.layout.observed import Observation
from migagent.node.names import is_gpu_resource
from migagent.node.port import PodView


@dataclass(frozen=True)
class RetryHold:
    """When a failed attempt may be tried again, and under which conditions it is held until then."""

    at: float
    """Wall-clock seconds (it must survive a restart)."""
    label: str | None
    """The layout the failed attempt applied; another label is a new request, never held."""
    depends: str | None
    """`depends_on` digest at the failed attempt's start; None: unknown (then only time and label count)."""
    failures: int
    """Consecutive failed attempts, this one included (the back-off's exponent)."""
    blockers: tuple[Blocker, ...] = ()
    """What the failed attempt met after its cordon and could not get past: looked for before the next."""

    def due(self, *, now: float, label: str | None) -> bool:
        """True when the hold no longer applies by time or by label (the digest is the caller's to compare)."""
        return now >= self.at or label != self.label

    def to_annotation(self) -> str:
        data: dict[str, object] = {
            "at": self.at, "label": self.label, "depends": self.depends, "failures": self.failures
        }
        if self.blockers:
            data["blockers"] = [blocker.to_json() for blocker in self.blockers]
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_annotation(cls, text: str | None) -> RetryHold | None:
        """None for a missing or unreadable annotation (then nothing is held: an attempt runs)."""
        if not text:
            return None
        try:
            data = decode_json(text)
            blockers = data.get("blockers")
            return cls(
                at=float(data["at"]),
                label=None if data.get("label") is None else str(data["label"]),
                depends=None if data.get("depends") is None else str(data["depends"]),
                failures=int(data.get("failures", 1)),
                blockers=tuple(b for item in (blockers if isinstance(blockers, list) else [])
                               if (b := Blocker.from_json(item)) is not None),
            )
        except (ValueError, TypeError, KeyError):
            return None


def attempt_number(previous: AttemptMarker | None, hold: RetryHold | None) -> int:
    """This attempt's number: counted on the Node, and in memory too (the hold), so a node whose
    status writes are refused still backs off further each time."""
    return max(previous.number if previous is not None else 0, hold.failures if hold is not None else 0) + 1


def depends_on(
    *,
    layout_text: bytes,
    observation: Observation | None,
    gpu_pods: Iterable[PodView],
    allocatable: Mapping[str, int],
) -> str:
    """A digest of everything an attempt's outcome depends on; equal digests: expect the same outcome."""
    gpus = (
        None
        if observation is None
        else [
            [
                gpu.index,
                gpu.mig_current,
                gpu.mig_pending,
                sorted(
                    [str(gi.placement), gi.profile_id, list(gi.ci_profile_ids), sorted(p.pid for _, p in gi.processes)]
                    for gi in gpu.gpu_instances
                ),
                sorted(p.pid for p in gpu.processes),
            ]
            for gpu in sorted(observation.gpus, key=lambda g: g.index)
        ]
    )
    pods = sorted([str(p.ref), p.ref.uid, p.phase, p.deleting] for p in gpu_pods if p.gpu_resources)
    advertised = sorted((k, v) for k, v in allocatable.items() if is_gpu_resource(k))
    canonical = {
        "layout": hashlib.sha256(layout_text).hexdigest(),
        "gpus": gpus,
        "pods": pods,
        "advertised": advertised,
    }
    return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode("utf-8")).hexdigest()[:32]
