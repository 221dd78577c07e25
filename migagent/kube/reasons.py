"""What each `MigConfigReady` condition reason means, for people: the README's reason table is
generated from this (scripts/sync_readme_reasons.py) and a test keeps the two equal, so a reason
added to `ConditionReason` cannot go undocumented."""

from __future__ import annotations

from collections.abc import Mapping

from migagent.kube.names import ConditionReason

# reason -> (the `nvidia.com/mig.config.state` it goes with, what it means)
REASON_MEANINGS: Mapping[ConditionReason, tuple[str, str]] = {
    ConditionReason.APPLIED: ("success", "the GPUs hold the layout and the node advertises it"),
    ConditionReason.RECONFIGURING: ("pending", "a change is under way: cordon, pause, apply through NVML"),
    ConditionReason.DRAINING: ("pending", "evicting the pods on the GPU instances the change destroys or resets"),
    ConditionReason.WAITING_FOR_DEVICE_PLUGIN: (
        "pending, then failed",
        "the GPUs changed; waiting for Node allocatable to show what the layout advertises",
    ),
    ConditionReason.DRAIN_BLOCKED: (
        "failed",
        "pods that must move cannot be evicted (DaemonSet, mirror or bare pods, a PodDisruptionBudget); nothing"
        " changed",
    ),
    ConditionReason.APPLY_FAILED: ("failed", "an NVML operation failed; what the attempt did was undone"),
    ConditionReason.INVALID_LAYOUT: (
        "failed",
        "the label names a config the file lacks, the file is malformed, or the device plugin cannot advertise"
        " the layout",
    ),
    ConditionReason.LAYOUT_SELECTS_NO_GPU: (
        "failed",
        "the config's device filters and indices select none of the node's GPUs",
    ),
    ConditionReason.LAYOUT_DOES_NOT_FIT: ("failed", "the layout cannot be placed on a GPU of the node"),
    ConditionReason.REBOOT_REQUIRED: (
        "failed or rebooting",
        "a MIG mode change needs a GPU reset the platform cannot do; a reboot activates it",
    ),
    ConditionReason.WAITING_FOR_DRIVER: (
        "-",
        "with `--wait-for-operator`: the GPU Operator's driver-ready and toolkit-ready markers are not there yet",
    ),
    ConditionReason.STORAGE_UNWRITABLE: (
        "failed",
        "the journal directory cannot be written (read-only, full, no permission, a file-size limit); found"
        " before anything on the node was touched; the message names the path and the errno",
    ),
    ConditionReason.NVML_UNAVAILABLE: (
        "failed",
        "the agent could not initialise NVML (no driver, a driver/library mismatch) and exited; it changed nothing",
    ),
    ConditionReason.UNKNOWN: ("-", "the agent could not tell (status Unknown); its logs say why"),
}


def reason_table() -> str:
    """The README's table of condition reasons, one row per `ConditionReason`, in enum order."""
    rows = ["| reason | state | meaning |", "|---|---|---|"]
    for reason in ConditionReason:
        state, meaning = REASON_MEANINGS[reason]
        rows.append(f"| `{reason.value}` | {state} | {meaning} |")
    return "\n".join(rows) + "\n"
