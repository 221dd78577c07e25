"""Classify pynvml errors into migagent's error classes where they enter.

Every NVML call in this package runs inside `nvml_call(what, gpu_label)`, so an `NVMLError` never
leaves the package: callers branch on `InUseError`, `TransientError`... and read a message that
names the GPU, the operation and NVML's own error name.

Messages are built from the `NVML_ERROR_*` constant names, never from `str(exc)`: for codes 19 and
up pynvml's `__str__` calls `nvmlErrorString` through the loaded library, which may be absent (or
the simulator) and can itself fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import pynvml

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

T = TypeVar("T")

# nvml.h's value; nvidia-ml-py names it only from 13.x on, and the floor we support is older.
NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30
# Raised by nvidia-ml-py 12.560+ for some unversioned calls; older releases have no such class.
LIBRARY_MISMATCH: tuple[type[Exception], ...] = tuple(
    cls for cls in (getattr(pynvml, "NVMLLibraryMismatchError", None),) if isinstance(cls, type)
)

# NVML return code -> constant name, read from pynvml itself so new codes are named too.
_ERROR_NAMES: dict[int, str] = {
    value: name for name, value in vars(pynvml).items() if name.startswith("NVML_ERROR_") and isinstance(value, int)
}

# Conditions that clear by themselves; the delay (seconds) is a first retry, the caller backs off.
_TRANSIENT_DELAYS: dict[int, float] = {
    pynvml.NVML_ERROR_TIMEOUT: 5.0,
    pynvml.NVML_ERROR_NOT_READY: 2.0,
    pynvml.NVML_ERROR_UNKNOWN: 5.0,
    pynvml.NVML_ERROR_IRQ_ISSUE: 5.0,
    pynvml.NVML_ERROR_MEMORY: 5.0,
}

_CLASS_BY_CODE: dict[int, type[PermanentError]] = {
    pynvml.NVML_ERROR_IN_USE: InUseError,
    pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES: InsufficientResourcesError,
    pynvml.NVML_ERROR_RESET_REQUIRED: ResetRequiredError,
    pynvml.NVML_ERROR_NOT_SUPPORTED: NotSupportedError,
    pynvml.NVML_ERROR_NO_PERMISSION: NoPermissionError,
    # A missing symbol means this driver is too old for the call: the driver does not support it.
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND: NotSupportedError,
    NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: NotSupportedError,
}

_HINTS: dict[int, str] = {
    pynvml.NVML_ERROR_IN_USE: "a process or another client (nvidia-persistenced, dcgm, a container) holds it",
    pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES: "the slices it needs are occupied",
    pynvml.NVML_ERROR_RESET_REQUIRED: "the GPU must be reset (or the machine rebooted)",
    pynvml.NVML_ERROR_NO_PERMISSION: "MIG changes need root or the mig/config capability",
    pynvml.NVML_ERROR_GPU_IS_LOST: "the GPU fell off the bus; it needs a reset or reboot",
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED: "the NVIDIA kernel driver is not loaded",
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: "libnvidia-ml.so.1 (the NVIDIA driver's NVML library) is not installed here",
    pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: "libnvidia-ml and the kernel driver versions differ",
}


def nvml_error_name(code: int) -> str:
    """`NVML_ERROR_IN_USE` for 19; a readable fallback for codes newer than this pynvml."""
    return _ERROR_NAMES.get(code, f"NVML error code {code}")


def describe(code: int, *, what: str, gpu_label: str) -> str:
    hint = _HINTS.get(code)
    suffix = f": {hint}" if hint else ""
    return f"{gpu_label}: {what} failed with {nvml_error_name(code)} ({code}){suffix}"


def classify_code(code: int, *, what: str, gpu_label: str) -> MigAgentError:
    """The migagent error for NVML return code `code` (not raised; the caller raises it `from` the cause)."""
    message = describe(code, what=what, gpu_label=gpu_label)
    if code in _TRANSIENT_DELAYS:
        return TransientError(message, delay=_TRANSIENT_DELAYS[code])
    return _CLASS_BY_CODE.get(code, PermanentError)(message)


def classify(exc: pynvml.NVMLError, *, what: str, gpu_label: str) -> MigAgentError:
    return classify_code(int(exc.value), what=what, gpu_label=gpu_label)


@contextmanager
def nvml_call(what: str, gpu_label: str) -> Iterator[None]:
    """Run the NVML call(s) in the block; re-raise any NVML failure classified, naming GPU and operation."""
    try:
        yield
    except pynvml.NVMLError as exc:
        raise classify(exc, what=what, gpu_label=gpu_label) from exc
    except LIBRARY_MISMATCH as exc:
        # pynvml raises this instead of FUNCTION_NOT_FOUND for some unversioned calls.
        raise NotSupportedError(
            f"{gpu_label}: {what} failed: this pynvml does not match the installed NVML library"
        ) from exc


def nvml_probe(call: Callable[[], T], *, absent: frozenset[int], what: str, gpu_label: str) -> T | None:
    """`call()`, or None when NVML answers with one of the `absent` codes (a value, not a failure).

    Enumerations use this: "profile not on this GPU" (NOT_SUPPORTED / INVALID_ARGUMENT) or "no MIG
    device at this index" (NOT_FOUND) are answers; every other code is classified and raised.
    """
    try:
        return call()
    except pynvml.NVMLError as exc:
        if int(exc.value) in absent:
            return None
        raise classify(exc, what=what, gpu_label=gpu_label) from exc
