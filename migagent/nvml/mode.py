"""Interpret `nvmlDeviceSetMigMode`'s activation status (returned, not raised; docs/nvml.md §4)."""

from __future__ import annotations

import enum

import pynvml

from migagent.errors import PermanentError
from migagent.nvml.errors import classify_code

# The platform cannot reset the GPU (pass-through VM, Windows): only a reboot applies the mode.
_NEEDS_REBOOT = frozenset({pynvml.NVML_ERROR_RESET_REQUIRED, pynvml.NVML_ERROR_NOT_SUPPORTED})
# The mode is pending: an idle GPU plus a reset activates it (Ampere, or a busy Hopper).
_PENDING = frozenset({pynvml.NVML_SUCCESS, pynvml.NVML_ERROR_IN_USE})


class ModeActivation(enum.StrEnum):
    """What a MIG mode change needs before it takes effect."""

    ACTIVE = "active"
    PENDING_RESET = "pending-reset"
    REBOOT_REQUIRED = "reboot-required"


def activation_of(status: int, *, mode: tuple[bool, bool], enabled: bool, what: str, gpu_label: str) -> ModeActivation:
    """Map (activation status, MIG mode read back afterwards) to what the caller must do next."""
    current, pending = mode
    if status in _NEEDS_REBOOT:
        return ModeActivation.REBOOT_REQUIRED
    if status == pynvml.NVML_SUCCESS and current == enabled:
        return ModeActivation.ACTIVE
    if status in _PENDING and pending == enabled:
        return ModeActivation.PENDING_RESET
    if status == pynvml.NVML_SUCCESS:
        raise PermanentError(
            f"{gpu_label}: {what} reported success but MIG mode reads current="
            f"{_word(current)}, pending={_word(pending)}"
        )
    raise classify_code(status, what=f"{what} (activation status)", gpu_label=gpu_label)


def _word(enabled: bool) -> str:
    return "enabled" if enabled else "disabled"
