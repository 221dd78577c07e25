"""What the chaos suite measures on a simulated node: cordon episodes, time cordoned or paused,
evictions, and attempts against the back-off schedule.

`NodeTimeline` follows every committed Node write (the fake API server's listener), so it sees each
cordon and pause as the cluster does; `AttemptLog` is the agent's metrics listener and keeps when each
reconcile started, how long it ran and how it ended.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from migagent.attempt.listener import NullListener, Outcome
from migagent.node.names import DEPLOY_LABEL_PREFIX, PAUSED_FOR_MIG_CHANGE
from migagent.reconcile.retry import RetryPolicy
from migagent_sim.cluster import SimCluster

JsonDict = dict[str, Any]
_QUIET = (Outcome.UNCHANGED, Outcome.NO_DESIRED_LAYOUT)
_SLACK = 0.9
"""An attempt counts as early when it starts before 90% of the back-off's delay has passed."""


class NodeTimeline:
    """(time, cordoned, paused) at every committed change of the Node."""

    def __init__(self, cluster: SimCluster) -> None:
        self._lock = threading.Lock()
        self._marks: list[tuple[float, bool, bool]] = [(time.monotonic(), *_disturbed(cluster.node()))]
        cluster.api.on_node_changed(self._changed)

    def _changed(self, node: JsonDict) -> None:
        with self._lock:
            self._marks.append((time.monotonic(), *_disturbed(node)))

    def cordon_episodes(self) -> int:
        with self._lock:
            marks = list(self._marks)
        return sum(1 for before, after in pairwise(marks) if after[1] and not before[1])

    def share_disturbed(self, until: float) -> float:
        """Share of the time from the first mark to `until` that the node was cordoned or paused."""
        with self._lock:
            marks = [*self._marks, (until, False, False)]
        total = until - marks[0][0]
        busy = sum(b[0] - a[0] for a, b in pairwise(marks) if a[1] or a[2])
        return busy / total if total > 0 else 0.0


def _disturbed(node: JsonDict) -> tuple[bool, bool]:
    labels: dict[str, str] = node["metadata"].get("labels", {})
    paused = any(k.startswith(DEPLOY_LABEL_PREFIX) and v == PAUSED_FOR_MIG_CHANGE for k, v in labels.items())
    return bool(node.get("spec", {}).get("unschedulable")), paused


@dataclass(frozen=True)
class Attempt:
    started: float
    ended: float
    outcome: Outcome


@dataclass
class AttemptLog(NullListener):
    """The agent's metrics listener: every reconcile that did more than re-check a settled node."""

    attempts: list[Attempt] = field(default_factory=list)

    def reconcile_finished(self, outcome: Outcome, duration_s: float) -> None:
        ended = time.monotonic()
        if outcome not in _QUIET:
            self.attempts.append(Attempt(ended - duration_s, ended, outcome))


@dataclass(frozen=True)
class BackoffCheck:
    attempts: int
    allowed: int
    """How many attempts the back-off schedule allows in the window (attempts that take no time)."""
    early: int
    """Attempts that started before the back-off's delay after the failure before them had passed."""


def check_backoff(log: AttemptLog, retry: RetryPolicy, *, window_s: float) -> BackoffCheck:
    attempts = list(log.attempts)
    early = 0
    failures = 0
    for previous, current in pairwise(attempts):
        failures = failures + 1 if previous.outcome is Outcome.FAILED else 0
        if failures and current.started - previous.ended < _SLACK * retry.failure_delay(failures):
            early += 1
    allowed, spent = 1, 0.0
    while True:
        spent += retry.failure_delay(allowed)
        if spent > window_s:
            break
        allowed += 1
    return BackoffCheck(attempts=len(attempts), allowed=allowed, early=early)


def evictions(cluster: SimCluster, since: int = 0) -> Counter[str]:
    """Eviction requests by answer: `201` done, `429` refused for now, `500` refused for ever, ..."""
    return Counter(str(r.status) for r in cluster.api.requests[since:] if r.subresource == "eviction")


def evicted_pods(cluster: SimCluster) -> Counter[str]:
    """Pod name -> how often an eviction of it was accepted."""
    return Counter(r.name or "" for r in cluster.api.requests if r.subresource == "eviction" and r.status == 201)
