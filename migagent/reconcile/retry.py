"""The one retry policy: how a step is retried within one apply, and when a failed node is tried again.

A transient NVML error (timeout, not ready) is retried in place by tenacity with exponential back-off
that never waits less than the delay the error itself suggests. A failed attempt (the agent's or host
mode's) is tried again after `failure_delay(failures)`, doubling per consecutive failure up to a cap.
The same `RetryPolicy` object, built once from the flags, is handed to the apply engine and to the
agent or host loop, so there is one answer to "when is a failed node retried?". The agent keeps the
retry time on the Node (attempt.backoff), so a restarted agent honours it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenacity import Retrying

from migagent.clock import Clock
from migagent.retrying import transient_retrying


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
    """A tenacity policy for one step: retry TransientError only, sleeping on `clock` (migagent.retrying)."""
    return transient_retrying(
        clock=clock, what=what, attempts=policy.step_attempts, delay=policy.step_delay, event="step_retrying",
        subject="step",
    )
