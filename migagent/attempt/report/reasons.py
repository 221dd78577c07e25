"""The README's reason table, generated from the one table in code, `ConditionReason` (each member's
meaning is its docstring, its suggested action `action`); scripts/sync_readme_reasons.py writes it and
a test keeps the two equal, so a reason added to the enum cannot go undocumented."""

from __future__ import annotations

from collections.abc import Mapping

from migagent.node.names import ConditionReason

# reason -> the `nvidia.com/mig.config.state` it goes with
REASON_STATES: Mapping[ConditionReason, str] = {
    ConditionReason.APPLIED: "success",
    ConditionReason.RECONFIGURING: "pending",
    ConditionReason.DRAINING: "pending",
    ConditionReason.WAITING_FOR_DEVICE_PLUGIN: "pending, then failed",
    ConditionReason.DRAIN_BLOCKED: "failed",
    ConditionReason.APPLY_FAILED: "failed",
    ConditionReason.INVALID_LAYOUT: "failed",
    ConditionReason.LAYOUT_SELECTS_NO_GPU: "failed",
    ConditionReason.LAYOUT_DOES_NOT_FIT: "failed",
    ConditionReason.REBOOT_REQUIRED: "failed or rebooting",
    ConditionReason.DEVICE_PLUGIN_NOT_PAUSED: "failed",
    ConditionReason.WAITING_FOR_DRIVER: "-",
    ConditionReason.STORAGE_UNWRITABLE: "failed",
    ConditionReason.NVML_UNAVAILABLE: "failed",
    ConditionReason.OTHER_MIG_OWNER: "failed",
    ConditionReason.STRATEGY_MISMATCH: "failed",
    ConditionReason.NO_DESIRED_LAYOUT: "(none)",
    ConditionReason.UNKNOWN: "-",
}


def reason_table() -> str:
    """The README's table of condition reasons, one row per `ConditionReason`, in enum order."""
    rows = ["| reason | state | meaning | suggested action |", "|---|---|---|---|"]
    for reason in ConditionReason:
        rows.append(f"| `{reason.value}` | {REASON_STATES[reason]} | {reason.__doc__} | {reason.action or '-'} |")
    return "\n".join(rows) + "\n"
