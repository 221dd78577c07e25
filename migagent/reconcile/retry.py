"""The one retry policy: how a step is retried within one apply, and when a failed node is tried again.

A transient NVML error (timeout, not ready) is retried in place by tenacity with exponential back-off
that never waits less than the delay the error itself suggests. A failed attempt (the agent's or host
mode's) is tried again after `failure_delay(failures)`, doubling per consecutive failure up to a cap.
The same `RetryPolicy` object, built once from the flags, is handed to the apply engine and to the
agent or host loop, so there is one answer to "when is a failed node retried?". The agent keeps the
retry time on the Node (attempt.backoff), so a restarted agent honours it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from migagent.clock import Clock
from migagent.errors import TransientError

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    step_attempts: int = 5
    """How many times one step is tried when it keeps failing transiently."""
    step_backoff_initial: float = 1.0
    step_backoff_max: float = 60.0
    failure_backoff_initial: float = 30.0
    """Delay before retrying a failed attempt, doubled per consecutive failure up to the max."""
    failure_backoff_max: float = 1800.0

    def __post_init__(self) -> None:
        if self.failure_backoff_initial <= 0 or self.failure_backoff_max < self.failure_backoff_initial:
            raise ValueError(
                f"retry back-off must be 0 < initial <= max, got {self.failure_backoff_initial}"
                f" and {self.failure_backoff_max}"
            )

    def step_delay(self, attempt: int, suggested: float = 0.0) -> float:
        exponential = self.step_backoff_initial * 2.0 ** max(0, attempt - 1)
        return min(self.step_backoff_max, max(exponential, suggested))

    def failure_delay(self, failures: int) -> float:
        """Seconds before the next attempt after `failures` consecutive failed ones (1: the first)."""
        return min(self.failure_backoff_max, self.failure_backoff_initial * 2.0 ** max(0, failures - 1))


def step_retrying(policy: RetryPolicy, *, clock: Clock, what: str) -> Retrying:
    """A tenacity policy for one step: retry TransientError only, sleeping on `clock`."""
    return Retrying(
        retry=retry_if_exception_type(TransientError),
        stop=stop_after_attempt(policy.step_attempts),
        wait=_backoff(policy),
        sleep=clock.sleep,
        before_sleep=_log_retry(what),
        reraise=True,
    )


def _backoff(policy: RetryPolicy) -> Callable[[RetryCallState], float]:
    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        suggested = error.delay if isinstance(error, TransientError) else 0.0
        return policy.step_delay(state.attempt_number, suggested)

    return wait


def _log_retry(what: str) -> Callable[[RetryCallState], None]:
    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning("step_retrying", step=what, attempt=state.attempt_number, delay=delay, error=str(error))

    return before_sleep
