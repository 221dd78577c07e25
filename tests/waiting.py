"""One wait for the suites' "until this holds" checks: poll, and fail naming what never happened."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(check: Callable[[], bool], what: str, *, timeout_s: float = 60.0, poll_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout_s:g}s: {what}")
        time.sleep(poll_s)
