"""Every API call is bounded in all: retries stop once two request timeouts are spent."""

from __future__ import annotations

import pytest

from migagent.clock import FakeClock
from migagent.errors import TransientError
from migagent.kube.classify import call_with_retries
from migagent.kube.timeouts import RequestTimeout


def test_a_server_that_never_answers_costs_about_two_request_timeouts_not_five() -> None:
    clock = FakeClock()
    timeout = RequestTimeout(30.0)
    tries: list[float] = []

    def times_out() -> None:
        tries.append(clock.monotonic())
        clock.advance(timeout.request)  # the request hangs until its timeout
        raise TransientError("patch node: the API server did not answer in time (request timed out)")

    with pytest.raises(TransientError):
        call_with_retries("patch node", times_out, clock=clock, budget_s=timeout.call_budget)

    assert len(tries) == 2
    assert clock.elapsed <= timeout.call_budget + 1.0


def test_quick_transient_failures_still_get_every_attempt_within_the_budget() -> None:
    clock = FakeClock()
    failures = iter([TransientError("HTTP 503", delay=0.0)] * 4)

    def flaky() -> str:
        error = next(failures, None)
        if error is not None:
            raise error
        return "ok"

    assert call_with_retries("get node", flaky, clock=clock, budget_s=60.0) == "ok"
