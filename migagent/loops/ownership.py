"""Exactly one MIG manager per node, for the agent's whole life: the state lock, then the node's Lease.

`NodeOwnership.acquire` blocks (without writing anything to the Node or the GPUs) until this process
holds the flock on the state directory (reconcile.statelock: host mode, `apply` and other agents on
this host) and the node's Lease (kube.lease: agents anywhere, e.g. a force-deleted pod whose container
still runs, a surge rollout, two installs). A thread then renews the Lease; if it cannot renew for a
whole lease duration another agent may have taken over, so the agent is asked to stop. On exit both
are released, the Lease explicitly so a successor need not wait for it to expire.

`OwnedAgent` is the agent with this wrapped around its loop: nothing runs before ownership is held.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from migagent.clock import Clock
from migagent.kube.lease import NodeLease
from migagent.loops.agent import Agent
from migagent.reconcile.statelock import StateLock

log = structlog.get_logger(__name__)


class NodeOwnership:
    def __init__(
        self,
        *,
        lock: StateLock | None,
        lease: NodeLease | None,
        clock: Clock,
        retry_s: float | None = None,
    ) -> None:
        """`retry_s`: how often a waiting agent tries again and a holder renews (default: a third of
        the lease duration, as client-go's retry period is to its lease duration)."""
        self._lock = lock
        self._lease = lease
        self._clock = clock
        duration = float(lease.duration_s) if lease is not None else 15.0
        self._retry_s = retry_s if retry_s is not None else max(0.05, duration / 3)
        self._renewer: threading.Thread | None = None
        self._done = threading.Event()
        self.lost = threading.Event()
        """Set when the Lease could not be renewed for a whole duration: someone else may own the node now."""

    def acquire(self, stop: threading.Event) -> bool:
        """Block until owned (True) or `stop` is set (False). Writes nothing but the lock file and the Lease."""
        waiting_logged = False
        while not stop.is_set():
            if self._try_once():
                log.info("node_ownership_taken", lease=self._lease.where if self._lease else None)
                self._start_renewing(stop)
                return True
            if not waiting_logged:
                log.warning("waiting_for_node_ownership", **self._holders())
                waiting_logged = True
            self._clock.wait(stop, self._retry_s)
        return False

    def release(self) -> None:
        self._done.set()
        if self._renewer is not None:
            self._renewer.join(timeout=max(5.0, 2 * self._retry_s))
            self._renewer = None
        if self._lease is not None and not self.lost.is_set():
            self._lease.release()
        if self._lock is not None:
            self._lock.release()

    def abandon(self) -> None:
        """What a SIGKILL leaves: the kernel drops the state lock, the Lease stays until it expires (tests, chaos)."""
        self._done.set()
        if self._lock is not None:
            self._lock.release()
        self.lost.set()

    @contextmanager
    def held(self, stop: threading.Event) -> Iterator[bool]:
        """Owned for the block (True), or never (False, when stopped while waiting); released after."""
        owned = self.acquire(stop)
        try:
            yield owned
        finally:
            if owned:
                self.release()
            elif self._lock is not None:
                self._lock.release()

    def _try_once(self) -> bool:
        if self._lock is not None and not self._lock.try_acquire():
            return False
        return self._lease is None or self._lease.try_acquire_or_renew()

    def _holders(self) -> dict[str, str | None]:
        return {
            "state_lock": self._lock.holder() if self._lock is not None and not self._lock.held else None,
            "lease": self._lease.where if self._lease is not None else None,
            "lease_holder": self._lease.holder if self._lease is not None else None,
        }

    def _start_renewing(self, stop: threading.Event) -> None:
        if self._lease is None:
            return
        lease = self._lease
        self._done.clear()

        def renew() -> None:
            last_renewed = self._clock.monotonic()
            while not self._clock.wait(self._done, self._retry_s):
                if lease.try_acquire_or_renew():
                    last_renewed = self._clock.monotonic()
                    continue
                if lease.holder not in (None, lease.identity) or self._clock.monotonic() - last_renewed >= (
                    lease.duration_s
                ):
                    log.error("node_lease_lost", lease=lease.where, holder=lease.holder)
                    self.lost.set()
                    stop.set()
                    return

        self._renewer = threading.Thread(target=renew, name="migagent-lease", daemon=True)
        self._renewer.start()


class OwnedAgent(Agent):
    """An Agent whose loop runs only while this process owns the node (NodeOwnership)."""

    def __init__(self, *args: Any, ownership: NodeOwnership, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ownership = ownership

    def run(self, stop: threading.Event) -> None:
        with self.ownership.held(stop) as owned:
            if owned:
                super().run(stop)
            else:
                log.info("agent_stopped_before_owning_the_node")
