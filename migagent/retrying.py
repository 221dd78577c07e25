"""Every in-place retry and wait in migagent, on tenacity and the `Clock`: one module to read for how
anything is tried again before the attempt itself fails.

- `transient_retrying`: an operation that failed with a TransientError is tried again after a delay
  that is never shorter than the one the error suggests (a Kubernetes call, an NVML step).
- `poll_until`: a check that has no answer yet is asked again, its pause doubling up to an interval,
  until a deadline or a stop request (the device plugin's new advertisement, the operator's markers,
  the state lock).
- `pause`: one wait that a stop request cuts short; `Doubling`: a back-off that doubles to a cap (the
  watch's reconnects, a refused eviction). Loops that wait on many things at once (the drain) use these.

The one failure back-off (when a failed attempt runs again) is not here: it is `reconcile.retry.RetryPolicy`.
Tenacity measures its own time with `time.monotonic`; every stop and wait here reads the `Clock`
instead, so a test's fake clock drives them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import structlog
from tenacity import RetryCallState, Retrying, retry_if_exception_type, retry_if_result

from migagent.clock import Clock
from migagent.errors import TransientError

log = structlog.get_logger(__name__)

T = TypeVar("T")

Delay = Callable[[int, float], float]
"""(attempt number, delay the error suggests) -> seconds to wait before the next try."""


def transient_retrying(
    *,
    clock: Clock,
    what: str,
    attempts: int,
    delay: Delay,
    budget_s: float | None = None,
    event: str = "retrying",
    subject: str = "call",
) -> Retrying:
    """Tenacity's Retrying for TransientError only: at most `attempts` tries, and none started once
    `budget_s` (tries and waits together) is spent. Each retry is logged as `event`, `subject=what`."""
    started = clock.monotonic()

    def spent(state: RetryCallState) -> bool:
        over = budget_s is not None and clock.monotonic() - started >= budget_s
        return over or state.attempt_number >= attempts

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        return delay(state.attempt_number, error.delay if isinstance(error, TransientError) else 0.0)

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        seconds = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning(event, **{subject: what}, attempt=state.attempt_number, delay=seconds, error=str(error))

    return Retrying(
        retry=retry_if_exception_type(TransientError),
        stop=spent,
        wait=wait,
        sleep=clock.sleep,
        before_sleep=before_sleep,
        reraise=True,
    )


def poll_until(
    check: Callable[[], T | None],
    *,
    clock: Clock,
    timeout_s: float,
    interval_s: float,
    stop: threading.Event | None = None,
    first_interval_s: float | None = None,
) -> tuple[T | None, bool]:
    """Call `check` until it returns a value or `timeout_s` passes: (last value, in time).

    `first_interval_s`: the first pause, doubled after each check up to `interval_s` (what is waited
    for is often quick; a fixed interval would only add latency). Setting `stop` ends the wait
    early, as a timeout (the caller's stop request then explains it)."""
    deadline = clock.monotonic() + timeout_s
    pauses = Doubling(interval_s if first_interval_s is None else min(first_interval_s, interval_s), interval_s)
    stopped = threading.Event()

    def over(state: RetryCallState) -> bool:
        return stopped.is_set() or clock.monotonic() >= deadline

    def wait(state: RetryCallState) -> float:
        return min(pauses.next(), max(0.0, deadline - clock.monotonic()))

    def sleep(seconds: float) -> None:
        if pause(clock, stop, seconds):
            stopped.set()

    def ask() -> T | None:
        return None if stopped.is_set() else check()  # a stop request ends the wait without asking again

    retrying = Retrying(
        retry=retry_if_result(lambda value: value is None),
        stop=over,
        wait=wait,
        sleep=sleep,
        retry_error_callback=_none,
    )
    value = retrying(ask)
    return value, value is not None


def _none(state: RetryCallState) -> None:
    return None


def pause(clock: Clock, stop: threading.Event | None, seconds: float) -> bool:
    """Wait `seconds` on `clock`, less when `stop` is set meanwhile; True if it was."""
    if stop is None:
        clock.sleep(seconds)
        return False
    return clock.wait(stop, seconds)


@dataclass
class Doubling:
    """A delay that doubles at each use up to `maximum`; `reset` goes back to `initial`."""

    initial: float
    maximum: float

    def __post_init__(self) -> None:
        self.current = self.initial

    def next(self) -> float:
        """The delay to wait now; the next one is twice as long (up to the maximum)."""
        now, self.current = self.current, min(self.maximum, self.current * 2)
        return now

    def reset(self) -> None:
        self.current = self.initial
