"""The suites' give-up bound stretches with the machine's load and never shrinks during one wait."""

from __future__ import annotations

import time
from collections.abc import Iterator

from migagent_sim.deadline import MAX_LOAD_FACTOR, Deadline, load_factor, wait_until


def test_the_load_factor_never_shortens_a_bound_nor_stretches_it_without_limit() -> None:
    assert 1.0 <= load_factor() <= MAX_LOAD_FACTOR


def _factors(*values: float) -> Iterator[float]:
    yield from values
    while True:
        yield values[-1]


def test_a_deadline_is_stretched_by_the_highest_load_seen_while_waiting() -> None:
    factors = _factors(2.0, 8.0, 2.0)  # factor 2 at the start, 8 once, then 2 again
    bound = Deadline(0.05, load=lambda: next(factors))
    assert bound.factor == 2.0
    time.sleep(0.15)  # past 0.05 x 2, within 0.05 x 8
    assert not bound.passed()
    assert bound.factor == 8.0
    assert bound.describe() == "0.05s x 8.0 for load"
    assert 0.0 < bound.left() <= 0.4 - 0.15
    time.sleep(bound.left() + 0.01)
    assert bound.passed()  # the lower load since does not lower the bound
    assert bound.left() == 0.0


def test_on_an_idle_machine_the_bound_is_the_seconds_given() -> None:
    bound = Deadline(0.0, load=lambda: 1.0)
    assert bound.passed()
    assert bound.describe() == "0s"


def test_a_wait_ends_true_on_the_check_that_holds_and_false_once_its_bound_passed() -> None:
    answers = iter([False, False, True])
    calls: list[bool] = []

    def third_time() -> bool:
        calls.append(next(answers))
        return calls[-1]

    assert wait_until(third_time, 60.0, poll_s=0.001)
    assert len(calls) == 3
    assert not wait_until(lambda: False, 0.0, poll_s=0.001)  # zero seconds times any factor is zero
