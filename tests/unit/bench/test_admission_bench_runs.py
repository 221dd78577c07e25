"""Smoke test of the admission bench: its decisions, never its timings."""

from __future__ import annotations

import pytest

from bench.admission_bench import main


def test_the_admission_bench_decides_each_case_as_the_policy_says(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--repeat", "1"])

    rows = capsys.readouterr().out.splitlines()[2:]
    decisions = [row.split("  ")[0].strip() + ": " + row.split()[-3] for row in rows]
    assert decisions == [
        "agent, allowed (state label): allowed",
        "agent, denied (mig.config): denied",
        "admin, not judged: allowed",
    ]
