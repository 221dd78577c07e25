import pytest
from structlog.testing import capture_logs

from migagent.clock import FakeClock
from migagent.errors import PermanentError, TransientError
from migagent.reconcile.retry import RetryPolicy, step_retrying


def _run(policy: RetryPolicy, clock: FakeClock, failures: list[Exception]) -> int:
    calls = 0
    for attempt in step_retrying(policy, clock=clock, what="GPU 0: create-gi"):
        with attempt:
            calls += 1
            if failures:
                raise failures.pop(0)
    return calls


def test_transient_errors_are_retried_with_exponential_backoff_on_the_clock() -> None:
    clock = FakeClock()
    policy = RetryPolicy(step_attempts=5, step_backoff_initial=1.0, step_backoff_max=60.0)
    with capture_logs() as logs:
        calls = _run(policy, clock, [TransientError("busy", delay=0.0) for _ in range(3)])
    assert calls == 4
    assert clock.sleeps == [1.0, 2.0, 4.0]
    assert [log["event"] for log in logs] == ["step_retrying"] * 3


def test_the_delay_an_error_suggests_is_a_lower_bound() -> None:
    clock = FakeClock()
    with capture_logs():
        _run(RetryPolicy(step_backoff_initial=1.0), clock, [TransientError("not ready", delay=7.0)])
    assert clock.sleeps == [7.0]


def test_retries_stop_after_the_configured_attempts_and_reraise() -> None:
    clock = FakeClock()
    with capture_logs(), pytest.raises(TransientError, match="timeout"):
        _run(RetryPolicy(step_attempts=3), clock, [TransientError("timeout", delay=0.0) for _ in range(5)])
    assert len(clock.sleeps) == 2


def test_permanent_errors_are_not_retried() -> None:
    clock = FakeClock()
    with pytest.raises(PermanentError):
        _run(RetryPolicy(), clock, [PermanentError("in use")])
    assert clock.sleeps == []


def test_the_failure_backoff_doubles_per_failure_up_to_the_maximum() -> None:
    policy = RetryPolicy(failure_backoff_initial=30.0, failure_backoff_max=100.0)
    assert [policy.failure_delay(n) for n in (1, 2, 3, 4)] == [30.0, 60.0, 100.0, 100.0]
