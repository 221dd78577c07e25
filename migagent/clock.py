"""The time seam: every wait and timestamp goes through a `Clock`, so tests run on a fake one.

Nothing else in migagent calls `time.sleep` or `time.time`; tenacity gets `sleep=clock.sleep`.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def wait(self, event: threading.Event, timeout: float) -> bool:
        """Wait until `event` is set or `timeout` seconds pass; True if the event was set."""
        ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait(self, event: threading.Event, timeout: float) -> bool:
        return event.wait(max(0.0, timeout))


class FakeClock:
    """A clock that advances instantly when waited on; `elapsed` tells how long code 'slept'."""

    def __init__(self, *, start_wall: float = 1_800_000_000.0) -> None:
        self._now = 0.0
        self._start_wall = start_wall
        self.sleeps: list[float] = []

    @property
    def elapsed(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += max(0.0, seconds)

    def monotonic(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._start_wall + self._now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)

    def wait(self, event: threading.Event, timeout: float) -> bool:
        if event.is_set():
            return True
        self.sleep(timeout)
        return event.is_set()
