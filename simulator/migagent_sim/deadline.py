"""How long a test or a simulated component waits before it gives up, stretched by the machine's load.

A wait ends on what it waits for; the bound only decides when a wait that will never end is called a
failure. On an idle machine a bound of 30 s is generous; at load 20 on 2 cores every process gets a
tenth of the CPU it had, and the same wait for the same work failed (issue 33). So each bound is
multiplied by the load factor: the 1-minute load average per core (at least 1), sampled at every check
and never lowered during one wait, since the average trails a burst of load by up to a minute.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

MAX_LOAD_FACTOR = 10.0
"""A wait that is truly stuck still fails (and pytest-timeout bounds every test besides)."""


def load_factor() -> float:
    """How many times slower than an idle machine this one runs work now (1.0 .. MAX_LOAD_FACTOR)."""
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return min(MAX_LOAD_FACTOR, max(1.0, per_core))


class Deadline:
    """`seconds` of an idle machine from now, times the highest load factor seen while waiting."""

    def __init__(self, seconds: float, *, load: Callable[[], float] = load_factor) -> None:
        self.seconds = seconds
        self._load = load
        self._started = time.monotonic()
        self._factor = load()

    @property
    def factor(self) -> float:
        return self._factor

    def passed(self) -> bool:
        self._factor = max(self._factor, self._load())
        return time.monotonic() - self._started >= self.seconds * self._factor

    def left(self) -> float:
        """Seconds left at the current factor (0 once passed): a bound for one blocking call."""
        self._factor = max(self._factor, self._load())
        return max(0.0, self.seconds * self._factor - (time.monotonic() - self._started))

    def describe(self) -> str:
        """'30s' on an idle machine, '30s x 3.2 for load' when stretched: for failure messages."""
        if self._factor <= 1.0:
            return f"{self.seconds:g}s"
        return f"{self.seconds:g}s x {self._factor:.1f} for load"


def wait_until(check: Callable[[], bool], seconds: float, *, poll_s: float = 0.02) -> bool:
    """Poll `check` until it holds (True), or until `seconds` of an idle machine, stretched by the load
    factor, have passed without it (False)."""
    deadline = Deadline(seconds)
    while not check():
        if deadline.passed():
            return False
        time.sleep(poll_s)
    return True
