"""Exactly one MIG manager per node: the state lock for the agent's whole life, the node's Lease
while an attempt writes.

`NodeOwnership.acquire` blocks (without writing anything) until this process holds the flock on the
state directory (reconcile.statelock: host mode, `apply` and other agents on this host). The node's
Lease (kube.lease: agents anywhere, e.g. a force-deleted pod whose container still runs, a surge
rollout, two installs) is taken only when an attempt is about to write (`claim`), kept through the
change by a renewing thread, and released when the attempt ends (`unclaim`): an idle agent holds it
not, and so costs no request for it. If a holder cannot renew for a whole lease duration another
agent may have taken over, so the agent is asked to stop.

`OwnedAgent` is the agent with this wrapped around its loop and its attempts: an attempt reads
without the Lease; at its first write (attempt.first_write) it stops, the Lease is claimed (waiting
while another agent holds it), and the attempt runs again from fresh reads, so what it writes was
decided under the Lease.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from migagent.attempt.first_write import LeaseNeeded
from migagent.attempt.phases import Outcome
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

    @property
    def taken_over(self) -> bool:
        """Whether the Lease held now was taken from a record this process had not written."""
        return self._lease is None or self._lease.taken_over

    @property
    def claimed(self) -> bool:
        """Whether this process may write now: it holds the Lease (or runs without one)."""
        return self._lease is None or self._renewer is not None

    def acquire(self, stop: threading.Event) -> bool:
        """Block until the state lock is held (True) or `stop` is set (False). Writes nothing but the lock file."""
        return self._until(stop, self._try_lock, taken="node_ownership_taken")

    def claim(self, stop: threading.Event) -> bool:
        """Block until the Lease is held (True; renewed from now on) or `stop` is set (False)."""
        if self.claimed:
            return True
        lease = self._lease
        assert lease is not None
        if not self._until(stop, lease.try_acquire_or_renew, taken="node_lease_taken"):
            return False
        self._start_renewing(stop)
        return True

    def unclaim(self) -> None:
        """Stop renewing and release the Lease (unless lost), so another agent may write at once."""
        if self._renewer is None:
            return
        self._done.set()
        self._renewer.join(timeout=max(5.0, 2 * self._retry_s))
        self._renewer = None
        if self._lease is not None and not self.lost.is_set():
            self._lease.release()

    def release(self) -> None:
        self.unclaim()
        if self._lock is not None:
            self._lock.release()

    def abandon(self) -> None:
        """What a SIGKILL leaves: the kernel drops the state lock, the Lease stays until it expires (tests, chaos)."""
        self._done.set()
        self._renewer = None
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

    def _until(self, stop: threading.Event, attempt: Any, *, taken: str) -> bool:
        waiting_logged = False
        while not stop.is_set():
            if attempt():
                log.info(taken, lease=self._lease.where if self._lease else None)
                return True
            if not waiting_logged:
                log.warning("waiting_for_node_ownership", **self._holders())
                waiting_logged = True
            self._clock.wait(stop, self._retry_s)
        return False

    def _try_lock(self) -> bool:
        return self._lock is None or self._lock.try_acquire()

    def _holders(self) -> dict[str, str | None]:
        return {
            "state_lock": self._lock.holder() if self._lock is not None and not self._lock.held else None,
            "lease": self._lease.where if self._lease is not None else None,
            "lease_holder": self._lease.holder if self._lease is not None else None,
        }

    def _start_renewing(self, stop: threading.Event) -> None:
        lease = self._lease
        assert lease is not None
        done = self._done = threading.Event()

        def renew() -> None:
            # Real seconds, whatever the agent's clock: the Lease expires in the API server's and the
            # other agents' time (and a test's fake clock must not spin this thread).
            last_renewed = time.monotonic()
            while not done.wait(self._retry_s):
                if lease.try_acquire_or_renew():
                    last_renewed = time.monotonic()
                    continue
                if lease.holder not in (None, lease.identity) or time.monotonic() - last_renewed >= lease.duration_s:
                    log.error("node_lease_lost", lease=lease.where, holder=lease.holder)
                    self.lost.set()
                    stop.set()
                    return

        self._renewer = threading.Thread(target=renew, name="migagent-lease", daemon=True)
        self._renewer.start()


class OwnedAgent(Agent):
    """An Agent whose loop runs only while this process holds the state lock, and whose attempts
    write only while it holds the node's Lease (NodeOwnership)."""

    def __init__(self, *args: Any, ownership: NodeOwnership, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ownership = ownership

    def run(self, stop: threading.Event) -> None:
        with self.ownership.held(stop) as owned:
            if owned:
                super().run(stop)
            else:
                log.info("agent_stopped_before_owning_the_node")

    def reconcile_once(self, stop: threading.Event | None = None) -> Outcome:
        """Read without the Lease; an attempt that must write runs again, from fresh reads, holding it."""
        # One event for the attempt and the Lease's renewer, also when the caller gave none: a renewer
        # that cannot renew sets it, and the attempt in flight must be the one to see that.
        stop = stop if stop is not None else threading.Event()
        try:
            return super().reconcile_once(stop)
        except LeaseNeeded:
            pass
        if not self.ownership.claim(stop):
            return Outcome.STOPPED
        try:
            return super().reconcile_once(stop)
        finally:
            self.ownership.unclaim()

    def _may_write(self) -> bool:
        return self.ownership.claimed

    def _node_from_watch(self) -> bool:
        # Without the Lease the attempt only reads; with it, the watch's Node serves unless the Lease
        # came from another holder (who may have written since the watch's last event reached us).
        return not self.ownership.claimed or not self.ownership.taken_over
