"""What the harness sees of one run: every change of the Node, and every pod that left the node.

It listens where the simulated kubelet listens (the watches of `tests.realkube.world.RealKubeApi`),
so both managers are observed through the same stream with the same lag. A pod that left is
"evicted" when the API server marked it with the `DisruptionTarget` condition the Eviction API sets
(reason `EvictionByEvictionAPI`), else "deleted".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bench.head_to_head.timeline import NodeSample, sample
from migagent_sim.deadline import Deadline, load_factor

JsonDict = dict[str, Any]


@dataclass(frozen=True)
class PodGone:
    namespace: str
    name: str
    t: float
    evicted: bool


def _evicted(pod: JsonDict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "DisruptionTarget" and c.get("reason") == "EvictionByEvictionAPI" for c in conditions)


class Recorder:
    def __init__(self, node_name: str, *, load: Callable[[], float] = load_factor) -> None:
        self._node = node_name
        self._load = load
        self._lock = threading.Lock()
        self._samples: list[NodeSample] = []
        self._gone: list[PodGone] = []
        self._marks: list[tuple[float, str]] = []
        self._changed = threading.Condition(self._lock)

    # -- listeners (called on the kubelet's watch threads) ---------------------------------------

    def node_changed(self, node: JsonDict) -> None:
        if node["metadata"]["name"] != self._node:
            return
        with self._lock:
            now = sample(node, time.monotonic())
            if not self._samples or not now.same_as(self._samples[-1]):
                self._samples.append(now)
                self._changed.notify_all()

    def pod_gone(self, pod: JsonDict) -> None:
        metadata = pod["metadata"]
        with self._lock:
            self._gone.append(PodGone(metadata.get("namespace", ""), metadata["name"], time.monotonic(), _evicted(pod)))
            self._changed.notify_all()

    def mark(self, text: str) -> None:
        """Something the harness did (killed the manager, started it), for the timeline."""
        with self._lock:
            self._marks.append((time.monotonic(), text))

    # -- reading -------------------------------------------------------------------------------

    def marks(self, origin: float) -> list[tuple[float, str]]:
        with self._lock:
            return [(t - origin, text) for t, text in self._marks]

    def samples(self, origin: float) -> list[NodeSample]:
        """Every sample so far, timed from `origin` (a time.monotonic() value)."""
        with self._lock:
            return [replace(s, t=s.t - origin) for s in self._samples]

    def gone(self, origin: float) -> list[PodGone]:
        with self._lock:
            return [replace(g, t=g.t - origin) for g in self._gone]

    def catch_up(self, node: JsonDict, *, timeout_s: float) -> bool:
        """Until the latest sample shows what `node` (a read of the Node made now) shows; False on `timeout_s`."""
        read = sample(node, 0.0)
        return self.wait_quiet(0.0, timeout_s=timeout_s, done=lambda samples: samples[-1].same_as(read))

    def latest(self) -> NodeSample | None:
        with self._lock:
            return self._samples[-1] if self._samples else None

    def wait_quiet(self, quiet_s: float, *, timeout_s: float, done: Callable[[Sequence[NodeSample]], bool]) -> bool:
        """Until `done(every sample so far)` holds (times are time.monotonic() values) and nothing changed for
        `quiet_s`; False once `timeout_s` of an idle machine, stretched by the load factor, has passed (at load
        28 on 2 cores NVIDIA's mig-manager took 150 s for `three-fast`, and its device plugin longer to
        advertise). `done` must not call back into the recorder (its lock is held)."""
        deadline = Deadline(timeout_s, load=self._load)
        with self._lock:
            while True:
                quiet_since = max([*(s.t for s in self._samples[-1:]), *(g.t for g in self._gone[-1:]), 0.0])
                if self._samples and done(list(self._samples)) and time.monotonic() - quiet_since >= quiet_s:
                    return True
                if deadline.passed():
                    return False
                self._changed.wait(timeout=min(0.2, max(0.01, deadline.left())))
