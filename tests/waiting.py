"""One wait for the suites' "until this holds" checks: poll, and fail naming what never happened.

The bound is a `Deadline`: the seconds given, stretched by the machine's load (migagent_sim.deadline),
so a loaded machine makes a wait longer, never a failure; a wait that is truly stuck still fails."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from migagent_sim.deadline import Deadline

T = TypeVar("T")


def eventually(check: Callable[[], bool], what: str, *, timeout_s: float = 60.0, poll_s: float = 0.05) -> None:
    deadline = Deadline(timeout_s)
    while not check():
        if deadline.passed():
            raise AssertionError(f"not within {deadline.describe()}: {what}")
        time.sleep(poll_s)


def eventually_value(check: Callable[[], T | None], what: str, *, timeout_s: float = 30.0, poll_s: float = 0.02) -> T:
    """Poll `check` until it returns something truthy, and return that."""
    deadline = Deadline(timeout_s)
    while True:
        value = check()
        if value:
            return value
        if deadline.passed():
            raise AssertionError(f"gave up waiting for {what} (not within {deadline.describe()})")
        time.sleep(poll_s)
