"""Drain the pods a plan disturbs: evict through the Eviction API (so PDBs hold), wait until gone.

`scope.disturbed_pods` picks the pods; `Drainer` moves them, the way `kubectl drain`
does (docs/kubernetes.md §2): a 429 (a PodDisruptionBudget allows no disruption now) is
retried with back-off until the drain timeout, a 404 means done, and a pod counts as gone when
the node's pods no longer hold it by name, or hold a different UID under it (a same-named
replacement). Progress costs one list of the node's pods per poll, however many pods are leaving;
the polls start fast (terminations are often quick) and slow to `poll_interval_s`. Plain DELETE,
which bypasses PDBs, is used only when the admin asked for `force_delete`. DaemonSet and mirror pods
are never touched. A pod already Terminating (deleted by someone, or evicted by an earlier attempt)
is not evicted again: it is waited for, and one past its grace period is reported as such (a stuck
kubelet or finalizer, which another eviction would not fix). On timeout, DrainBlockedError names
every pod still in the way and the PDB that refused its last eviction, as the server's 429 named it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import structlog

from migagent.clock import Clock
from migagent.errors import DrainBlockedError, TransientError
from migagent.node.port import EvictionStatus, KubePort, PodRef, PodView
from migagent.retrying import Doubling, pause

log = structlog.get_logger(__name__)

_MIN_SLEEP_S = 0.01
FIRST_POLL_S = 0.05
"""The first wait for evicted pods to go; each later one is twice as long, up to the poll interval."""


class DrainInterruptedError(TransientError):
    """The drain was asked to stop before every pod had left."""

    def __init__(self, message: str) -> None:
        super().__init__(message, delay=0.0)


@dataclass(frozen=True)
class DrainResult:
    removed: tuple[PodRef, ...]
    """Pods evicted (or deleted) and confirmed gone, in the order they left."""
    waited_s: float


@dataclass
class _PodProgress:
    pod: PodView
    backoff: Doubling
    requested: bool = False
    done: bool = False
    next_try: float = 0.0
    last_message: str = "not evicted yet"
    blocked_tries: int = field(default=0)
    refused_by: tuple[str, ...] | None = None
    """After a 429: the PodDisruptionBudgets it named (maybe none); None when the last try was no 429."""


class PodsStuckTerminatingError(DrainBlockedError):
    """The drain timed out on pods Terminating past their grace period: their kubelet cannot finish them
    (a finalizer, a hung container or volume). `stuck`: those pods, each by UID, for the next attempt to
    look for before it cordons (attempt.blockers)."""

    def __init__(self, message: str, *, pods: tuple[str, ...], stuck: tuple[PodRef, ...]) -> None:
        super().__init__(message, pods=pods)
        self.stuck = stuck


class Drainer:
    def __init__(
        self,
        api: KubePort,
        *,
        clock: Clock,
        retry_initial_s: float = 1.0,
        retry_max_s: float = 5.0,
        poll_interval_s: float = 1.0,
    ) -> None:
        self._api = api
        self._clock = clock
        self._retry_initial_s = retry_initial_s
        self._retry_max_s = retry_max_s
        self._poll_interval_s = poll_interval_s

    def drain(
        self,
        pods: Iterable[PodView],
        *,
        timeout_s: float,
        force_delete: bool = False,
        stop: threading.Event | None = None,
        checkpoint: Callable[[], None] | None = None,
    ) -> DrainResult:
        """Evict (or, with force_delete, delete) every pod and wait until each is gone.

        Setting `stop` (the agent is shutting down) ends the wait with DrainInterruptedError;
        `checkpoint` runs at every turn of the wait (what it raises ends the drain)."""
        start = self._clock.monotonic()
        deadline = start + timeout_s
        progress = [
            # Already Terminating: wait for it, never evict it again (each attempt would re-send it).
            _PodProgress(pod=pod, backoff=self._backoff(), requested=pod.deleting)
            for pod in pods
            if not (pod.is_daemonset_pod or pod.is_mirror)
        ]
        for item in progress:
            if item.requested:
                log.info("pod_already_terminating", pod=str(item.pod.ref), deadline=item.pod.deletion_deadline)
        removed: list[PodRef] = []
        poll_s = min(FIRST_POLL_S, self._poll_interval_s)
        while True:
            if checkpoint is not None:
                checkpoint()
            pending = [p for p in progress if not p.done]
            # No eviction once asked to stop: the successor evicts, and waits for what it evicted, itself.
            if pending and stop is not None and stop.is_set():
                names = ", ".join(str(p.pod.ref) for p in pending)
                raise DrainInterruptedError(f"drain interrupted by a stop request; still on the node: {names}")
            for item in pending:
                self._advance(item, force_delete=force_delete)
            self._check_gone([p for p in pending if p.requested and not p.done])
            removed.extend(p.pod.ref for p in pending if p.done)
            remaining = [p for p in progress if not p.done]
            now = self._clock.monotonic()
            if not remaining:
                return DrainResult(removed=tuple(removed), waited_s=now - start)
            if now >= deadline:
                raise self._blocked(remaining, timeout_s)
            wait_s = max(_MIN_SLEEP_S, self._next_wake(remaining, now, deadline, poll_s) - now)
            poll_s = min(self._poll_interval_s, poll_s * 2)
            pause(self._clock, stop, wait_s)  # a stop ends the wait; the next turn raises, before any eviction

    def _backoff(self) -> Doubling:
        return Doubling(self._retry_initial_s, self._retry_max_s)

    def _advance(self, item: _PodProgress, *, force_delete: bool) -> None:
        if not item.requested and self._clock.monotonic() >= item.next_try:
            self._request(item, force_delete=force_delete)

    def _check_gone(self, leaving: list[_PodProgress]) -> None:
        """One list of the node's pods settles every evicted pod: gone when absent or another UID. One
        still there is seen as it is now (its deletionTimestamp: when its grace period ends)."""
        if not leaving:
            return
        present = {(p.ref.namespace, p.ref.name): p for p in self._api.list_pods_on_node()}
        for item in leaving:
            ref = item.pod.ref
            now = present.get((ref.namespace, ref.name))
            item.done = now is None or now.ref.uid != ref.uid
            if item.done:
                log.info("pod_gone", pod=str(ref))
            elif now is not None and now.deletion_deadline is not None:
                item.pod = now

    def _request(self, item: _PodProgress, *, force_delete: bool) -> None:
        ref = item.pod.ref
        if force_delete:
            self._api.delete_pod(ref)
            item.requested = True
            log.info("pod_deleted", pod=str(ref))
            return
        try:
            outcome = self._api.evict(ref)
        except TransientError as error:
            item.refused_by = None
            self._retry_later(item, str(error), suggested_s=error.delay)
            return
        match outcome.status:
            case EvictionStatus.EVICTED:
                item.requested = True
                log.info("pod_evicted", pod=str(ref))
            case EvictionStatus.GONE:
                item.done = True
            case EvictionStatus.BLOCKED:
                item.refused_by = outcome.budgets
                self._retry_later(item, outcome.message, suggested_s=outcome.retry_after_s or 0.0)

    def _retry_later(self, item: _PodProgress, message: str, *, suggested_s: float) -> None:
        item.last_message = message
        item.blocked_tries += 1
        item.next_try = self._clock.monotonic() + max(item.backoff.next(), suggested_s)
        log.info("eviction_blocked", pod=str(item.pod.ref), tries=item.blocked_tries, reason=message)

    def _next_wake(self, remaining: list[_PodProgress], now: float, deadline: float, poll_s: float) -> float:
        wakes = [now + poll_s if p.requested else p.next_try for p in remaining]
        return min([*wakes, deadline])

    def _blocked(self, remaining: list[_PodProgress], timeout_s: float) -> DrainBlockedError:
        lines = [self._describe(item) for item in remaining]
        names = tuple(str(item.pod.ref) for item in remaining)
        message = (
            f"drain timed out after {timeout_s:g}s with {len(remaining)} pod(s) still holding devices the change"
            f" needs: {'; '.join(lines)}. Relax the PodDisruptionBudget(s), move the pod(s) away, raise the drain"
            " timeout, or allow --force-delete"
        )
        stuck = tuple(item.pod.ref for item in remaining if self._past_grace(item))
        if stuck:
            return PodsStuckTerminatingError(message, pods=names, stuck=stuck)
        return DrainBlockedError(message, pods=names)

    def _past_grace(self, item: _PodProgress) -> bool:
        deadline = item.pod.deletion_deadline
        return item.requested and deadline is not None and self._clock.wall() > deadline

    def _describe(self, item: _PodProgress) -> str:
        deadline = item.pod.deletion_deadline
        if deadline is not None and self._past_grace(item):
            late = self._clock.wall() - deadline
            return (
                f"pod {item.pod.ref} is Terminating {late:.0f}s past its grace period (a stuck kubelet, container"
                " or finalizer; it was not evicted again)"
            )
        if item.requested:
            return f"pod {item.pod.ref} was evicted but is still terminating"
        if item.refused_by is None:
            guarded = ""
        elif item.refused_by:
            guarded = f" (PodDisruptionBudget: {', '.join(item.refused_by)})"
        else:
            guarded = " (a PodDisruptionBudget)"  # a 429 whose body named none
        return f"pod {item.pod.ref}{guarded}: {item.last_message}"
