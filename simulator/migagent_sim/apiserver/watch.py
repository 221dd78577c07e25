"""Turning store events into the wire events of one watch request (selectors, bookmarks, timeout, drop).

The HTTP side hands in `write(event_dict)`; this module decides what to send and when to stop. With a
selector the apiserver reports an object that starts matching as ADDED and one that stops matching as
DELETED, which is reproduced here from each event's previous state.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from migagent.clock import Clock
from migagent_sim.apiserver.store import StoredEvent, Subscription

JsonDict = dict[str, Any]
Matcher = Callable[[JsonDict], bool]


class WatchEnd(Enum):
    TIMEOUT = "timeout"  # finish with the terminating chunk
    DROPPED = "dropped"  # close the connection without one


@dataclass(frozen=True)
class WatchOptions:
    timeout_s: float
    allow_bookmarks: bool
    bookmark_interval_s: float


def wire_event(event: StoredEvent, matches: Matcher) -> JsonDict | None:
    """The event a selective watcher sees for `event`, or None when it sees nothing."""
    now_matches = matches(event.obj)
    before_matched = event.previous is not None and matches(event.previous)
    if event.type == "DELETED":
        kind = "DELETED" if before_matched else None
    elif event.type == "ADDED" or not before_matched:
        kind = "ADDED" if now_matches else None
    else:
        kind = "MODIFIED" if now_matches else "DELETED"
    return {"type": kind, "object": event.obj} if kind else None


def bookmark(api_version: str, kind: str, resource_version: int) -> JsonDict:
    """Bookmarks carry only the type identity and the resourceVersion the watcher has caught up to."""
    return {
        "type": "BOOKMARK",
        "object": {"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": str(resource_version)}},
    }


class WatchPump:
    def __init__(
        self,
        *,
        subscription: Subscription,
        replay: Iterable[StoredEvent],
        matches: Matcher,
        options: WatchOptions,
        clock: Clock,
    ) -> None:
        self._subscription = subscription
        self._replay = list(replay)
        self._matches = matches
        self._options = options
        self._clock = clock
        self._caught_up_rv = subscription.start_rv

    def run(self, write: Callable[[JsonDict], None]) -> WatchEnd:
        """Send events until the timeout (ending with a bookmark when allowed) or until told to drop."""
        deadline = self._clock.monotonic() + self._options.timeout_s
        for event in self._replay:
            self._send(event, write)
        next_bookmark = self._clock.monotonic() + self._options.bookmark_interval_s
        while (now := self._clock.monotonic()) < deadline:
            wait_s = min(deadline, next_bookmark if self._options.allow_bookmarks else deadline) - now
            try:
                queued = self._subscription.events.get(timeout=max(wait_s, 0.0))
            except queue.Empty:
                if self._options.allow_bookmarks and self._clock.monotonic() >= next_bookmark:
                    write(self._bookmark())
                    next_bookmark = self._clock.monotonic() + self._options.bookmark_interval_s
                continue
            if queued is None:
                return WatchEnd.DROPPED
            self._send(queued, write)
        if self._options.allow_bookmarks:
            write(self._bookmark())
        return WatchEnd.TIMEOUT

    def _send(self, event: StoredEvent, write: Callable[[JsonDict], None]) -> None:
        self._caught_up_rv = max(self._caught_up_rv, event.resource_version)
        wire = wire_event(event, self._matches)
        if wire is not None:
            write(wire)

    def _bookmark(self) -> JsonDict:
        resource = self._subscription.resource
        return bookmark(resource.api_version, resource.kind, self._caught_up_rv)
