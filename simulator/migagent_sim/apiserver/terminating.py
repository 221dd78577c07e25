"""Graceful pod deletion: a deleted (or evicted) pod stays, Terminating, for its grace period, then goes.

The apiserver answers a graceful DELETE by setting `deletionTimestamp` (now + grace period) and
`deletionGracePeriodSeconds` on the pod, which stays listed and watchable; the kubelet stops the
containers and the pod object is removed only then (a DELETED watch event; the kubelet's
PodResources releases its devices at that point). Pods that never ran (no node, or already
Succeeded/Failed) and a grace period of 0 are removed at once. `grace_scale` shrinks every grace
period for tests (0.01: a 30 s grace period lasts 0.3 s; 0: removed within the DELETE, for tests whose
waits run on a fake clock); the timestamps still state the real one.

A pod's end (PodEnds: the on_pod_deleted listeners, where the simulated kubelet ends the pod's process
and releases its devices) runs once per pod: for a Terminating pod before its removal, as a kubelet
stops the containers and only then deletes the pod, so whoever sees the pod gone sees its process gone
too; for a pod removed at once (grace period 0: a forced delete), just after, as on a real node.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from migagent_sim.apiserver.errors import ApiError
from migagent_sim.apiserver.routing import PODS
from migagent_sim.apiserver.store import Store, StoredEvent

JsonDict = dict[str, Any]


def removed_at_once(pod: JsonDict, grace_s: int) -> bool:
    """Whether a delete skips the Terminating state (pod/strategy.go CheckGracefulDelete)."""
    phase = (pod.get("status") or {}).get("phase")
    return grace_s <= 0 or not (pod.get("spec") or {}).get("nodeName") or phase in ("Succeeded", "Failed")


class PodEnds:
    """The listeners told of each pod's end, once per pod: by the Terminator just before it removes a
    Terminating pod, or by the DELETED event of a pod removed at once."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._listeners: list[Callable[[JsonDict], None]] = []
        self._ended: set[str] = set()
        store.add_listener(self._removed)

    def add(self, listener: Callable[[JsonDict], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def end(self, pod: JsonDict) -> None:
        uid = pod["metadata"].get("uid", "")
        with self._lock:
            if uid in self._ended:
                return
            self._ended.add(uid)
            listeners = list(self._listeners)
        for listener in listeners:
            self._store.call_listener(listener, pod, f"the end of pod {pod['metadata'].get('name')}")

    def _removed(self, event: StoredEvent) -> None:
        if event.resource == PODS and event.type == "DELETED":
            self.end(event.obj)


class Terminator:
    """Removes Terminating pods when their (scaled) grace period is over, after `pod_ends` told of their
    end; `stop()` cancels what is pending."""

    def __init__(self, store: Store, pod_ends: PodEnds, *, grace_scale: float = 1.0) -> None:
        if grace_scale < 0:
            raise ValueError(f"grace_scale must be >= 0, got {grace_scale}")
        self._store = store
        self._pod_ends = pod_ends
        self._grace_scale = grace_scale
        self._lock = threading.Lock()
        self._timers: dict[tuple[str, str, str], threading.Timer] = {}
        self._stopped = False

    @property
    def immediate(self) -> bool:
        """Grace periods scaled to nothing: deleted pods leave within the request that deletes them."""
        return self._grace_scale == 0

    def schedule(self, pod: JsonDict, grace_s: int) -> None:
        """Remove `pod` (this uid) after `grace_s` seconds, or sooner if it was already due sooner."""
        metadata = pod["metadata"]
        key = (metadata["namespace"], metadata["name"], metadata["uid"])
        timer = threading.Timer(grace_s * self._grace_scale, self._finish, args=key)
        timer.daemon = True
        with self._lock:
            if self._stopped:  # the server is going away: nothing is finished after it
                return
            if key in self._timers:  # already Terminating: a second delete only ever shortens the wait
                if grace_s > 0:
                    return
                self._timers.pop(key).cancel()
            self._timers[key] = timer
        timer.start()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            timers, self._timers = list(self._timers.values()), {}
        for timer in timers:
            timer.cancel()

    def _finish(self, namespace: str, name: str, uid: str) -> None:
        with self._lock:
            self._timers.pop((namespace, name, uid), None)
        current = self._store.get(PODS, namespace, name)
        if current is None or current["metadata"].get("uid") != uid:
            return  # already gone, or a same-named replacement
        self._pod_ends.end(current)  # the containers stop, then the kubelet deletes the pod
        with contextlib.suppress(ApiError):  # removed meanwhile
            self._store.delete(PODS, namespace, name)
