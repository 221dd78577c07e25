"""The attempt's undo stack, its Node marker, and how failures are classified and backed off."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migagent.attempt.advertise.expected import NotAdvertisableError
from migagent.attempt.advertise.wait import AdvertisementTimeoutError
from migagent.attempt.undo import AttemptMarker, UndoStack, failure_reason
from migagent.errors import (
    DrainBlockedError,
    InvalidLayoutError,
    LayoutDoesNotFitError,
    PermanentError,
    ResetRequiredError,
    TransientError,
)
from migagent.node.names import ConditionReason
from migagent.reconcile.retry import RetryPolicy


def _recorder(done: list[str], name: str) -> Callable[[], None]:
    return lambda: done.append(name)


def test_undo_runs_the_inverse_actions_last_in_first_out() -> None:
    done: list[str] = []
    undo = UndoStack()
    for name in ("uncordon", "resume-plugin", "third"):
        undo.push(name, _recorder(done, name))
    assert undo.unwind() == ()
    assert done == ["third", "resume-plugin", "uncordon"]
    assert undo.names == ()


def test_a_failing_undo_action_does_not_stop_the_others_and_is_reported() -> None:
    done: list[str] = []
    undo = UndoStack()
    undo.push("uncordon", lambda: done.append("uncordon"))

    def broken() -> None:
        raise TransientError("HTTP 500")

    undo.push("resume-plugin", broken)
    failures = undo.unwind()
    assert done == ["uncordon"]
    assert failures == ("resume-plugin: HTTP 500",)


def test_pushing_a_name_again_replaces_its_action_but_keeps_its_place() -> None:
    done: list[str] = []
    undo = UndoStack()
    undo.push("uncordon", lambda: done.append("uncordon"))
    undo.push("plugin", lambda: done.append("old plugin"))
    undo.push("uncordon", lambda: done.append("uncordon again"))
    undo.push("plugin", lambda: done.append("new plugin"))
    undo.unwind()
    assert done == ["new plugin", "uncordon again"]


def test_popping_an_action_means_the_forward_path_already_did_it() -> None:
    done: list[str] = []
    undo = UndoStack()
    undo.push("uncordon", lambda: done.append("uncordon"))
    undo.pop("uncordon")
    assert "uncordon" not in undo
    undo.unwind()
    assert done == []


@given(number=st.integers(min_value=1, max_value=10_000), layout=st.none() | st.text(max_size=40))
def test_the_attempt_marker_survives_its_annotation_round_trip(number: int, layout: str | None) -> None:
    marker = AttemptMarker(number, layout, 1_800_000_000.5)
    assert AttemptMarker.from_annotation(marker.to_annotation()) == marker


def test_the_bare_count_a_failed_report_writes_is_read_as_an_attempt_number() -> None:
    assert AttemptMarker.from_annotation("3") == AttemptMarker(3)


@pytest.mark.parametrize("text", [None, "", "not json", "[1]", '{"layout": "x"}'])
def test_an_unreadable_marker_is_treated_as_no_previous_attempt(text: str | None) -> None:
    assert AttemptMarker.from_annotation(text) is None


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (DrainBlockedError("blocked", pods=("ml/a",)), ConditionReason.DRAIN_BLOCKED),
        (LayoutDoesNotFitError("too many"), ConditionReason.LAYOUT_DOES_NOT_FIT),
        (InvalidLayoutError("missing"), ConditionReason.INVALID_LAYOUT),
        (NotAdvertisableError("1c.3g.40gb"), ConditionReason.INVALID_LAYOUT),
        (ResetRequiredError("reboot"), ConditionReason.REBOOT_REQUIRED),
        (AdvertisementTimeoutError("late", diff={}), ConditionReason.WAITING_FOR_DEVICE_PLUGIN),
        (PermanentError("nvml"), ConditionReason.APPLY_FAILED),
        (TransientError("HTTP 503"), ConditionReason.APPLY_FAILED),
    ],
)
def test_each_failure_maps_to_its_condition_reason(error: Exception, reason: ConditionReason) -> None:
    assert failure_reason(error) is reason


@given(failures=st.integers(min_value=1, max_value=200))
def test_retry_delay_doubles_per_failure_and_never_exceeds_the_cap(failures: int) -> None:
    policy = RetryPolicy(failure_backoff_initial=30.0, failure_backoff_max=1800.0)
    assert 30.0 <= policy.failure_delay(failures) <= 1800.0
    assert policy.failure_delay(failures + 1) >= policy.failure_delay(failures)
    assert policy.failure_delay(1) == 30.0
    assert policy.failure_delay(2) == 60.0
