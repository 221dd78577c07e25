"""Wait until Node allocatable shows what the GPUs hold: after a change (the device plugin restarted),
or before one (a plugin still starting gets a settle period before anything is touched).

`wait_for_advertisement` follows the agent's Node watch, reading the Node itself only when the watch
has been quiet for a while (or polls the Node when no watch runs); an inexact expectation (a sharing
config the agent cannot know) must match and hold still for its `stable_s`, and a probe (the DRA
driver's ResourceSlices) must be satisfied too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Protocol

from migagent.attempt.advertise.expectation import Expectation, plugin_resources
from migagent.attempt.advertise.expected import describe_diff
from migagent.clock import Clock
from migagent.errors import TransientError
from migagent.node.port import NodeView
from migagent.retrying import poll_until


class AdvertisementTimeoutError(TransientError):
    """Node allocatable did not reach the expected MIG resources in time; `diff` says how it differs."""

    def __init__(self, message: str, *, diff: Mapping[str, tuple[int, int]]) -> None:
        super().__init__(message, delay=30.0)
        self.diff = dict(diff)


class NodeUpdates(Protocol):
    """The agent's watch of its own Node (sources.node_label.NodeLabelSource)."""

    @property
    def watching(self) -> bool:
        """False while no watch runs (not started, failing): then the Node is polled instead."""
        ...

    def node_after(self, seen: int, timeout_s: float) -> tuple[int, NodeView | None]:
        """(sequence, newest Node) once the watch has delivered one numbered past `seen`, or at timeout."""
        ...


WATCH_QUIET_S = 5.0
"""While waiting on the watch: with no Node event for this long, read the Node (the stream may be down)."""
_WATCH_SLICE_S = 0.25
"""While waiting on the watch, a stop request is noticed at least this often."""


class _Settling:
    """One wait's memory: the advertisement seen last and since when it held still.

    An exact expectation is met at the first match; an inexact one (attempt.advertise.expectation: a sharing
    config the agent cannot know) once it matches and has not changed for its `stable_s`. A probe
    (the DRA driver's ResourceSlices) must be satisfied too."""

    def __init__(self, expected: Mapping[str, int] | Expectation, clock: Clock) -> None:
        self._expected = Expectation.of(expected)
        self._clock = clock
        self._seen: dict[str, int] | None = None
        self._since = 0.0
        self.diff: dict[str, tuple[int, int]] = {}
        self.missing: str | None = None

    @property
    def changes_without_node_events(self) -> bool:
        """Whether readiness can change with no Node event: a probe (ResourceSlices) or a hold-still time."""
        return self._expected.probe is not None or self._expected.stable_s > 0

    def ready(self, node: NodeView) -> bool:
        self.diff = self._expected.diff(node.allocatable)
        probe = self._expected.probe
        self.missing = probe() if probe is not None and not self.diff else None  # one probe (a request) per look
        if self.diff or self.missing is not None:
            self._seen = None
            return False
        stable_s = self._expected.stable_s
        if stable_s <= 0:
            return True
        seen = plugin_resources(node.allocatable)
        now = self._clock.monotonic()
        if seen != self._seen:
            self._seen, self._since = seen, now
        return now - self._since >= stable_s

    def describe(self) -> str:
        parts = [describe_diff(self.diff)] if self.diff else []
        if self.missing is not None:
            parts.append(self.missing)
        return "; ".join(parts) or "the advertisement did not hold still"


def wait_for_advertisement(
    read_node: Callable[[], NodeView],
    expected: Mapping[str, int] | Expectation,
    *,
    timeout_s: float,
    clock: Clock,
    poll_interval_s: float = 2.0,
    stop: threading.Event | None = None,
    updates: NodeUpdates | None = None,
    checkpoint: Callable[[], None] | None = None,
) -> NodeView:
    """Wait until our Node's allocatable matches `expected`; AdvertisementTimeoutError otherwise.

    With `updates` (the watch the agent holds anyway) each Node event is checked as it arrives and
    the Node is read only when the watch has been quiet for WATCH_QUIET_S; without, or while that
    watch is not running, the Node is polled every `poll_interval_s`. `checkpoint` runs before every
    read of the Node and at every turn of the watch."""
    settling = _Settling(expected, clock)
    if updates is not None and updates.watching:
        return _advertised_on_watch(
            read_node, updates, settling,
            timeout_s=timeout_s, clock=clock, stop=stop, checkpoint=checkpoint, recheck_s=poll_interval_s,
        )

    def advertised() -> NodeView | None:
        if checkpoint is not None:
            checkpoint()
        node = read_node()
        return node if settling.ready(node) else None

    node = poll_until(advertised, clock=clock, timeout_s=timeout_s, interval_s=poll_interval_s, stop=stop)[0]
    if node is None:
        raise _advertisement_timeout(timeout_s, settling)
    return node


def _advertised_on_watch(
    read_node: Callable[[], NodeView],
    updates: NodeUpdates,
    settling: _Settling,
    *,
    timeout_s: float,
    clock: Clock,
    stop: threading.Event | None,
    checkpoint: Callable[[], None] | None,
    recheck_s: float,
) -> NodeView:
    # A probe or a hold-still time can turn ready with no Node event: then re-check every `recheck_s`.
    quiet_s = min(WATCH_QUIET_S, recheck_s) if settling.changes_without_node_events else WATCH_QUIET_S
    now = clock.monotonic()
    deadline, quiet_since = now + timeout_s, now
    seq, node = updates.node_after(-1, 0.0)  # the newest the watch has: no request when it already matches
    while True:
        if checkpoint is not None:
            checkpoint()
        if node is None:
            node, quiet_since = read_node(), clock.monotonic()
        if settling.ready(node):
            return node
        node = None
        while node is None:
            now = clock.monotonic()
            if now >= deadline or (stop is not None and stop.is_set()):
                raise _advertisement_timeout(timeout_s, settling)
            if now - quiet_since >= quiet_s:
                break  # read the Node ourselves
            wait = min(_WATCH_SLICE_S, deadline - now, quiet_since + quiet_s - now)
            newer, newest = updates.node_after(seq, wait)
            if newer > seq and newest is not None:
                seq, node, quiet_since = newer, newest, clock.monotonic()
            elif checkpoint is not None:
                checkpoint()  # a label change is a Node event too, but the watch may not carry it yet


def _advertisement_timeout(timeout_s: float, settling: _Settling) -> AdvertisementTimeoutError:
    return AdvertisementTimeoutError(
        f"the device plugin did not advertise the new layout within {timeout_s:g}s: {settling.describe()}",
        diff=settling.diff,
    )
