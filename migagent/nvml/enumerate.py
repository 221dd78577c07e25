"""Walk NVML's GI/CI profile query enums the way nvml.h says to: until INVALID_ARGUMENT.

pynvml's `NVML_*_PROFILE_COUNT` constants are those of the nvidia-ml-py release installed, not of
the driver: a newer driver offers profiles past them, and GPU instances of such a profile would be
invisible (their slices looking free) to a loop bounded by the constant. So the loop ends at the
first INVALID_ARGUMENT, skips NOT_SUPPORTED (a profile this GPU lacks, or "not while MIG is
disabled" on older drivers), and classifies every other error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pynvml

from migagent.errors import PermanentError
from migagent.nvml.errors import classify

T = TypeVar("T")

# A guard against a library that never says INVALID_ARGUMENT: nvml.h's enums stay far below it.
ENUM_LIMIT = 256


def profiles_by_enum(query: Callable[[int], T], *, what: str, gpu_label: str) -> list[tuple[int, T]]:
    """(enum, answer) for every enum from 0 that `query` answers, until NVML says INVALID_ARGUMENT."""
    found: list[tuple[int, T]] = []
    for enum in range(ENUM_LIMIT):
        try:
            found.append((enum, query(enum)))
        except pynvml.NVMLError as exc:
            code = int(exc.value)
            if code == pynvml.NVML_ERROR_INVALID_ARGUMENT:
                return found
            if code != pynvml.NVML_ERROR_NOT_SUPPORTED:
                raise classify(exc, what=f"{what}(enum {enum})", gpu_label=gpu_label) from exc
    raise PermanentError(
        f"{gpu_label}: {what} answered every enum from 0 to {ENUM_LIMIT - 1} without INVALID_ARGUMENT,"
        " which nvml.h promises at the end of the list; this NVML library is not behaving as documented"
    )
