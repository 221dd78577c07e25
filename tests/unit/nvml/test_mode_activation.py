"""activation_of(): nvmlDeviceSetMigMode's returned activation status plus the mode read back."""

from __future__ import annotations

import pynvml
import pytest

from migagent.errors import PermanentError, TransientError
from migagent.nvml.mode import ModeActivation, activation_of

LABEL = "GPU 1 (00000000:19:00.0)"


def _activation(status: int, *, current: bool, pending: bool, enabled: bool = True) -> ModeActivation:
    return activation_of(
        status, mode=(current, pending), enabled=enabled, what="nvmlDeviceSetMigMode(enable)", gpu_label=LABEL
    )


@pytest.mark.parametrize(
    ("status", "current", "pending", "expected"),
    [
        (pynvml.NVML_SUCCESS, True, True, ModeActivation.ACTIVE),
        (pynvml.NVML_SUCCESS, False, True, ModeActivation.PENDING_RESET),
        (pynvml.NVML_ERROR_IN_USE, False, True, ModeActivation.PENDING_RESET),
        (pynvml.NVML_ERROR_RESET_REQUIRED, False, True, ModeActivation.REBOOT_REQUIRED),
        (pynvml.NVML_ERROR_NOT_SUPPORTED, False, True, ModeActivation.REBOOT_REQUIRED),
    ],
)
def test_the_activation_status_and_mode_read_back_decide_what_the_change_needs(
    status: int, current: bool, pending: bool, expected: ModeActivation
) -> None:
    assert _activation(status, current=current, pending=pending) is expected


def test_disabling_is_active_when_the_mode_reads_disabled() -> None:
    assert _activation(pynvml.NVML_SUCCESS, current=False, pending=False, enabled=False) is ModeActivation.ACTIVE


def test_a_success_that_did_not_even_record_the_pending_mode_is_a_permanent_error() -> None:
    with pytest.raises(PermanentError, match="reported success but MIG mode reads current=disabled, pending=disabled"):
        _activation(pynvml.NVML_SUCCESS, current=False, pending=False)


def test_an_unknown_activation_status_is_classified_like_a_raised_error() -> None:
    with pytest.raises(TransientError, match=r"\(activation status\) failed with NVML_ERROR_UNKNOWN"):
        _activation(pynvml.NVML_ERROR_UNKNOWN, current=False, pending=True)
