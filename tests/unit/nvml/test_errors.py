"""Classification of pynvml errors into migagent errors, and the messages they carry."""

from __future__ import annotations

import pynvml
import pytest
from hypothesis import given
from hypothesis import strategies as st

from migagent.errors import (
    InsufficientResourcesError,
    InUseError,
    MigAgentError,
    NoPermissionError,
    NotSupportedError,
    PermanentError,
    ResetRequiredError,
    TransientError,
)
from migagent.nvml.errors import classify, nvml_call, nvml_error_name, nvml_probe

LABEL = "GPU 3 (00000000:1B:00.0)"

ALL_CODES = sorted(
    value for name, value in vars(pynvml).items() if name.startswith("NVML_ERROR_") and isinstance(value, int)
)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (pynvml.NVML_ERROR_IN_USE, InUseError),
        (pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES, InsufficientResourcesError),
        (pynvml.NVML_ERROR_RESET_REQUIRED, ResetRequiredError),
        (pynvml.NVML_ERROR_NOT_SUPPORTED, NotSupportedError),
        (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, NotSupportedError),
        (pynvml.NVML_ERROR_GPU_IS_LOST, PermanentError),
        (pynvml.NVML_ERROR_NO_PERMISSION, NoPermissionError),
        (pynvml.NVML_ERROR_INVALID_ARGUMENT, PermanentError),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, PermanentError),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, PermanentError),
        (pynvml.NVML_ERROR_NOT_FOUND, PermanentError),
    ],
)
def test_each_nvml_code_maps_to_the_error_class_the_engine_branches_on(
    code: int, expected: type[MigAgentError]
) -> None:
    error = classify(pynvml.NVMLError(code), what="nvmlGpuInstanceDestroy(GI 1)", gpu_label=LABEL)
    assert type(error) is expected


@pytest.mark.parametrize(
    "code",
    [
        pynvml.NVML_ERROR_TIMEOUT,
        pynvml.NVML_ERROR_NOT_READY,
        pynvml.NVML_ERROR_UNKNOWN,
        pynvml.NVML_ERROR_IRQ_ISSUE,
        pynvml.NVML_ERROR_MEMORY,
    ],
)
def test_conditions_that_clear_by_themselves_are_transient_with_a_positive_delay(code: int) -> None:
    error = classify(pynvml.NVMLError(code), what="nvmlDeviceGetMigMode", gpu_label=LABEL)
    assert isinstance(error, TransientError)
    assert error.delay > 0


@given(st.sampled_from(ALL_CODES))
def test_every_message_names_the_gpu_the_operation_and_nvmls_error_name(code: int) -> None:
    error = classify(pynvml.NVMLError(code), what="nvmlDeviceSetMigMode(enable)", gpu_label=LABEL)
    message = str(error)
    assert LABEL in message
    assert "nvmlDeviceSetMigMode(enable)" in message
    assert nvml_error_name(code) in message
    assert nvml_error_name(code).startswith("NVML_ERROR_")


def test_an_in_use_message_says_who_may_hold_the_gpu() -> None:
    error = classify(pynvml.NVMLError_InUse(), what="nvmlGpuInstanceDestroy(GI 2)", gpu_label=LABEL)
    assert str(error) == (
        "GPU 3 (00000000:1B:00.0): nvmlGpuInstanceDestroy(GI 2) failed with NVML_ERROR_IN_USE (19): "
        "a process or another client (nvidia-persistenced, dcgm, a container) holds it"
    )


def test_a_missing_nvml_library_says_the_driver_library_is_not_installed() -> None:
    error = classify(pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND), what="nvmlInit", gpu_label="node")
    assert type(error) is PermanentError
    assert str(error) == (
        "node: nvmlInit failed with NVML_ERROR_LIBRARY_NOT_FOUND (12): "
        "libnvidia-ml.so.1 (the NVIDIA driver's NVML library) is not installed here"
    )


def test_a_code_newer_than_pynvml_still_gets_a_readable_permanent_error() -> None:
    error = classify(pynvml.NVMLError(4242), what="nvmlDeviceGetCount", gpu_label="node")
    assert type(error) is PermanentError
    assert "NVML error code 4242" in str(error)


def test_nvml_call_raises_the_classified_error_from_the_nvml_cause() -> None:
    cause = pynvml.NVMLError_InsufficientResources()
    with pytest.raises(InsufficientResourcesError) as caught, nvml_call("create GI", LABEL):
        raise cause
    assert caught.value.__cause__ is cause


def test_nvml_call_lets_non_nvml_exceptions_through_unchanged() -> None:
    with pytest.raises(KeyError), nvml_call("create GI", LABEL):
        raise KeyError("not an NVML error")


def test_nvml_call_turns_a_pynvml_library_mismatch_into_not_supported() -> None:
    with pytest.raises(NotSupportedError, match="does not match the installed NVML"), nvml_call("x", LABEL):
        raise pynvml.NVMLLibraryMismatchError("mismatch")


def test_a_probe_answers_none_for_an_absent_code_and_raises_others_classified() -> None:
    def not_found() -> int:
        raise pynvml.NVMLError_NotFound()

    def timeout() -> int:
        raise pynvml.NVMLError_Timeout()

    absent = frozenset({pynvml.NVML_ERROR_NOT_FOUND})
    assert nvml_probe(not_found, absent=absent, what="probe", gpu_label=LABEL) is None
    assert nvml_probe(lambda: 7, absent=absent, what="probe", gpu_label=LABEL) == 7
    with pytest.raises(TransientError):
        nvml_probe(timeout, absent=absent, what="probe", gpu_label=LABEL)
