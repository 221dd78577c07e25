"""One table of reason codes: every failure reason carries a suggested action, and the README lists them all."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from migagent.attempt.report.status import with_action
from migagent.attempt.undo import failure_reason
from migagent.errors import DrainBlockedError, PermanentError
from migagent.node.names import ConditionReason, action_for

README = Path(__file__).resolve().parents[4] / "README.md"
FAILURES = [
    ConditionReason.DRAIN_BLOCKED,
    ConditionReason.APPLY_FAILED,
    ConditionReason.INVALID_LAYOUT,
    ConditionReason.LAYOUT_SELECTS_NO_GPU,
    ConditionReason.LAYOUT_DOES_NOT_FIT,
    ConditionReason.REBOOT_REQUIRED,
    ConditionReason.WAITING_FOR_DEVICE_PLUGIN,
]


def test_every_reason_a_failure_can_report_has_a_one_line_suggested_action() -> None:
    for reason in FAILURES:
        assert reason.action, f"{reason} has no suggested action"
        assert "\n" not in reason.action
    for error in (DrainBlockedError("x"), PermanentError("y")):
        assert failure_reason(error).action


def test_every_reason_has_a_docstring_saying_what_it_means() -> None:
    assert all(member.__doc__ and member.__doc__ != ConditionReason.__doc__ for member in ConditionReason)


@pytest.mark.parametrize("reason", list(ConditionReason), ids=str)
def test_the_readme_reason_table_lists_every_reason_with_its_action(reason: ConditionReason) -> None:
    # A row per reason, whatever the other columns: `| `Code` | ... | suggested action |`.
    rows = {
        match.group(1): match.group(2).strip()
        for match in re.finditer(r"^\| `(\w+)` \|.*\| ([^|]*) \|$", README.read_text(encoding="utf-8"), re.M)
    }
    assert reason.value in rows, f"README's reason table lacks {reason.value}"
    assert rows[reason.value] == (reason.action or "-")


def test_a_failure_message_ends_with_its_action_and_the_action_is_found_from_the_code_on_the_node() -> None:
    reason = ConditionReason.DRAIN_BLOCKED
    assert with_action(reason, "pod ml/a did not leave").endswith(f". Action: {reason.action}")
    assert action_for("DrainBlocked") == reason.action
    assert action_for("NoSuchReason") == ""
