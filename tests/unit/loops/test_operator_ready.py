"""Waiting for the GPU Operator's driver-ready and toolkit-ready markers before NVML is touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from migagent.clock import FakeClock
from migagent.loops.operator_ready import OperatorNotReadyError, wait_for_ready_markers


def test_with_both_markers_present_nothing_is_reported_or_awaited(tmp_path: Path) -> None:
    (tmp_path / "driver-ready").touch()
    (tmp_path / "toolkit-ready").touch()
    reports: list[str] = []
    clock = FakeClock()
    wait_for_ready_markers(tmp_path, timeout_s=60, clock=clock, report=reports.append)
    assert reports == []
    assert clock.monotonic() == 0


def test_a_marker_that_appears_later_ends_the_wait_after_reporting_what_was_awaited(tmp_path: Path) -> None:
    (tmp_path / "driver-ready").touch()
    reports: list[str] = []
    clock = FakeClock()
    original_sleep = clock.sleep

    def sleep(seconds: float) -> None:
        original_sleep(seconds)
        if clock.monotonic() >= 20:
            (tmp_path / "toolkit-ready").touch()

    clock.sleep = sleep  # type: ignore[method-assign]
    wait_for_ready_markers(tmp_path, timeout_s=600, clock=clock, report=reports.append)
    assert len(reports) == 1
    assert "toolkit-ready" in reports[0]
    assert "driver-ready" not in reports[0]
    assert 20 <= clock.monotonic() < 600


def test_markers_missing_past_the_timeout_fail_with_a_reason_that_names_them(tmp_path: Path) -> None:
    reports: list[str] = []
    with pytest.raises(OperatorNotReadyError, match=r"driver-ready, toolkit-ready marker\(s\) did not appear"):
        wait_for_ready_markers(tmp_path, timeout_s=30, clock=FakeClock(), report=reports.append)
    assert len(reports) == 2
    assert "did not appear" in reports[1]
