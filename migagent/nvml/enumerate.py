"""Walk NVML's GI/CI profile query enums: to max(pynvml's COUNT, the first INVALID_ARGUMENT).

pynvml's `NVML_*_PROFILE_COUNT` constants are those of the nvidia-ml-py release installed, not of
the driver: a newer driver offers profiles past them, and GPU instances of such a profile would be
invisible (their slices looking free) to a loop bounded by the constant. So every enum below the
constant is asked (an INVALID_ARGUMENT there is an enum this older driver does not know, not the
end), and past it the loop ends at the first INVALID_ARGUMENT (nvml.h's end of the enumeration).
NOT_SUPPORTED (a profile this GPU lacks, or "not while MIG is disabled" on older drivers) is skipped
everywhere. A driver that never says INVALID_ARGUMENT is asked up to `ENUM_LIMIT` and what it
answered is kept: nothing at all, while MIG is off, lets the caller fall back to the catalog.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pynvml

from migagent.nvml.errors import classify

T = TypeVar("T")

# A guard against a library that never says INVALID_ARGUMENT: nvml.h's enums stay far below it.
ENUM_LIMIT = 64
GI_ENUM_COUNT = int(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT)
CI_ENUM_COUNT = int(pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
_ABSENT = frozenset({pynvml.NVML_ERROR_INVALID_ARGUMENT, pynvml.NVML_ERROR_NOT_SUPPORTED})


def profiles_by_enum(
    query: Callable[[int], T], *, what: str, gpu_label: str, count: int = GI_ENUM_COUNT
) -> list[tuple[int, T]]:
    """(enum, answer) for every enum `query` answers, from 0 to max(`count`, the first INVALID_ARGUMENT)."""
    found: list[tuple[int, T]] = []
    for enum in range(ENUM_LIMIT):
        try:
            found.append((enum, query(enum)))
        except pynvml.NVMLError as exc:
            code = int(exc.value)
            if code not in _ABSENT:
                raise classify(exc, what=f"{what}(enum {enum})", gpu_label=gpu_label) from exc
            if code == pynvml.NVML_ERROR_INVALID_ARGUMENT and enum >= count:
                return found
    return found
