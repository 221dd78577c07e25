"""The desired layout from the agent's own Node label `nvidia.com/mig.config`, kept current by a watch.

A thread lists (GETs) the one Node, then watches it by field selector from that resourceVersion.
A stream the server ends at its timeout is followed by a watch from the last version seen (one
request per `watch_timeout_s` while idle). When the server says the version is too old (410), when
a stream drops, or when a call fails, it lists again before watching again, backing off while
streams keep ending at once, so a flapping API server costs a bounded number of requests. A change
of the label value wakes the agent at once; `wait` also returns on a periodic resync tick (the
agent re-checks from the Node the watch delivered), so drift is repaired even when nothing changes
(mig-manager watches with no resync and no retry: a failed node waits forever).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

import structlog

from migagent.clock import Clock
from migagent.errors import MigAgentError
from migagent.node.names import MIG_CONFIG_LABEL
from migagent.node.port import NodeEvent, NodeView, WatchExpired
from migagent.retrying import Doubling

log = structlog.get_logger(__name__)

# While waiting, the stop event is checked at least this often (a threading.Event cannot be waited
# on together with another one).
_STOP_POLL_S = 0.5


class NodeWatchApi(Protocol):
    """What the source needs from `migagent.kube.adapter.KubeApi`."""

    def get_node(self) -> NodeView: ...

    def watch_node(self, resource_version: str, timeout_s: float) -> Iterator[NodeEvent]: ...


@dataclass(frozen=True)
class WatchSettings:
    resync_period_s: float = 300.0
    """`wait` returns at least this often, so the agent re-checks the node (drift repair)."""
    watch_timeout_s: float = 300.0
    """How long the server keeps one watch stream open before ending it (then the source re-lists)."""
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    healthy_stream_s: float = 5.0
    """A stream that lasted at least this long resets the back-off; shorter ones grow it."""
    request_timeout_s: float = 30.0
    """The API client's request timeout: a read, and the slack a watch read gets past watch_timeout_s."""
    request_attempts: int = 5
    """How often one GET is tried (classify.call_with_retries) before the thread lists again."""

    @property
    def stuck_after_s(self) -> float:
        """The longest a working watch thread goes without progress: a GET tried every time and
        timing out, the longest back-off, then a watch read the server ends only at its timeout."""
        get_node = self.request_attempts * (self.request_timeout_s + self.backoff_max_s)
        return get_node + self.backoff_max_s + self.watch_timeout_s + self.request_timeout_s


@dataclass(frozen=True)
class Wakeup:
    """Why `wait` returned: the label changed, the resync period passed, or neither (timeout/stop)."""

    label_changed: bool = False
    resync: bool = False

    @property
    def due(self) -> bool:
        return self.label_changed or self.resync


class NodeLabelSource:
    """`start()` the watch thread; the agent calls `wait(stop, timeout_s)` and reads `desired`."""

    def __init__(
        self,
        api: NodeWatchApi,
        *,
        clock: Clock,
        settings: WatchSettings | None = None,
        label: str = MIG_CONFIG_LABEL,
        also_wake_on: tuple[str, ...] = (),
    ) -> None:
        """`also_wake_on`: other labels whose change wakes the agent too (`desired` stays `label`'s)."""
        self._api = api
        self._also = also_wake_on
        self._others: tuple[str | None, ...] = ()
        self._clock = clock
        self._settings = settings or WatchSettings()
        self._label = label
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._stopping = threading.Event()
        self._desired: str | None = None
        self._known = False
        self._last_resync = clock.monotonic()
        self._thread: threading.Thread | None = None
        self._last_progress = clock.monotonic()
        self._failing: str | None = None
        self.relists = 0
        """How many times the node was (re-)listed: a figure for tests and the bench."""
        self._node: NodeView | None = None
        self._node_seq = 0
        self._node_seen = threading.Event()
        self._resume: str | None = None
        """The resourceVersion a cleanly ended stream reached: the next watch starts there, unlisted."""

    # -- the agent's side ---------------------------------------------------------------------------

    @property
    def desired(self) -> str | None:
        """The last label value seen (None: no label, or nothing read yet)."""
        with self._lock:
            return self._desired

    def wait(self, stop: threading.Event, timeout_s: float) -> Wakeup:
        """Block until the label changes, the resync period passes, `stop` is set or `timeout_s` passes."""
        deadline = self._clock.monotonic() + max(0.0, timeout_s)
        while not stop.is_set():
            now = self._clock.monotonic()
            resync_at = self._last_resync + self._settings.resync_period_s
            if self._changed.is_set():
                self._changed.clear()
                return Wakeup(label_changed=True, resync=self._take_resync(now, resync_at))
            if now >= resync_at:
                return Wakeup(resync=self._take_resync(now, resync_at))
            if now >= deadline:
                return Wakeup()
            self._clock.wait(self._changed, min(_STOP_POLL_S, deadline - now, resync_at - now))
        return Wakeup()

    @property
    def watching(self) -> bool:
        """Whether the watch thread runs and its last list or watch succeeded (its events can be waited on)."""
        with self._lock:
            failing = self._failing is not None
        alive = self._thread is not None and self._thread.is_alive() and not self._stopping.is_set()
        return alive and not failing

    def node_after(self, seen: int, timeout_s: float) -> tuple[int, NodeView | None]:
        """(sequence, Node): the newest Node the watch delivered, as soon as its sequence number passes
        `seen` or after `timeout_s` (then whatever is newest). One waiter at a time (the agent's loop):
        waiting on the watch costs no request, where polling the Node costs one per poll."""
        if timeout_s > 0:
            self._node_seen.clear()
            with self._lock:
                newer = self._node_seq > seen
            if not newer:
                self._clock.wait(self._node_seen, timeout_s)
        with self._lock:
            return self._node_seq, self._node

    def _publish(self, node: NodeView) -> None:
        with self._lock:
            self._node = node
            self._node_seq += 1
        self._node_seen.set()

    def _take_resync(self, now: float, resync_at: float) -> bool:
        if now < resync_at:
            return False
        self._last_resync = now
        return True

    # -- the watch thread ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("NodeLabelSource already started")
        self._thread = threading.Thread(target=self._run, name="node-label-watch", daemon=True)
        self._thread.start()

    def stuck(self) -> str | None:
        """Why the watch thread is not doing its job (a liveness check), or None while it is."""
        if self._thread is None or self._stopping.is_set():
            return None
        if not self._thread.is_alive():
            return "the node label watch thread has ended"
        quiet = self._clock.monotonic() - self._last_progress
        if quiet > self._settings.stuck_after_s:
            return (
                f"the node label watch thread has made no progress for {quiet:.0f}s"
                f" (limit {self._settings.stuck_after_s:.0f}s)"
            )
        return None

    def failing(self) -> str | None:
        """The error of the last list or watch when it failed (a readiness check), else None."""
        with self._lock:
            return None if self._failing is None else f"cannot read or watch the node: {self._failing}"

    def stop(self, *, join_timeout_s: float = 2.0) -> None:
        """Ask the thread to end; a stream blocked in a read ends at its watch timeout at the latest."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(join_timeout_s)

    def _run(self) -> None:
        backoff = Doubling(self._settings.backoff_initial_s, self._settings.backoff_max_s)
        while not self._stopping.is_set():
            started = self._last_progress = self._clock.monotonic()
            try:
                self._list_then_watch()
            except WatchExpired:
                log.info("node_watch_expired")  # our resourceVersion is compacted away: list again
            except Exception as exc:  # the thread must survive anything a broken stream throws at it
                if self._stopping.is_set():
                    return
                error = str(exc) if isinstance(exc, MigAgentError) else f"{type(exc).__name__}: {exc}"
                with self._lock:
                    self._failing = error
                log.warning("node_watch_failed", error=error, retry_in_s=backoff.current)
            if self._clock.monotonic() - started >= self._settings.healthy_stream_s:
                backoff.reset()
                continue
            self._clock.wait(self._stopping, backoff.next())

    def _list_then_watch(self) -> None:
        resource_version, self._resume = self._resume, None  # any error from here on: list again
        if resource_version is None:
            node = self._api.get_node()
            with self._lock:
                self._failing = None
            self.relists += 1
            self._publish(node)
            self._deliver(node.labels.get(self._label), self._other_values(node.labels))
            resource_version = node.resource_version
        for event in self._api.watch_node(resource_version, self._settings.watch_timeout_s):
            if self._stopping.is_set():
                return
            self._last_progress = self._clock.monotonic()
            resource_version = event.resource_version or resource_version
            if event.type == "DELETED":
                self._deliver(None, ())
            elif event.node is not None:
                self._publish(event.node)
                self._deliver(event.node.labels.get(self._label), self._other_values(event.node.labels))
        # The stream ended as the server ends them (its timeout): watch on from the last version seen,
        # as client-go's reflector does, with no list; a version since compacted answers 410 (list then).
        self._resume = resource_version

    def _other_values(self, labels: Mapping[str, str]) -> tuple[str | None, ...]:
        return tuple(labels.get(label) for label in self._also)

    def _deliver(self, value: str | None, others: tuple[str | None, ...]) -> None:
        with self._lock:
            changed = not self._known or value != self._desired
            others_changed = self._known and others != self._others
            self._desired, self._others, self._known = value, others, True
        if changed:
            log.info("desired_layout_seen", layout=value)
            self._changed.set()
        elif others_changed:
            log.info("node_label_changed", labels=dict(zip(self._also, others, strict=False)))
            self._changed.set()
