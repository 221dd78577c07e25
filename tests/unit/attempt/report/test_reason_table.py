"""The README's condition-reason table is the code's: every `ConditionReason` has a meaning, and the
table in README.md is the one scripts/sync_readme_reasons.py generates from them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from migagent.attempt.report.reasons import REASON_STATES, reason_table
from migagent.node.names import ConditionReason

ROOT = Path(__file__).resolve().parents[4]


def test_every_condition_reason_has_a_state_and_a_meaning() -> None:
    assert set(REASON_STATES) == set(ConditionReason)
    assert all(reason.__doc__ for reason in ConditionReason)


def test_the_table_has_a_row_per_reason_including_the_waiting_and_selection_ones() -> None:
    rows = reason_table().splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == [reason.value for reason in ConditionReason]
    assert {"WaitingForDriver", "LayoutSelectsNoGpu", "Unknown"} <= {row.split("`")[1] for row in rows}


def test_the_readme_table_is_generated_from_the_code() -> None:
    check = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "sync_readme_reasons.py"), "--check"],
        capture_output=True, text=True, check=False, timeout=60, cwd=ROOT,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert reason_table() in (ROOT / "README.md").read_text(encoding="utf-8")
