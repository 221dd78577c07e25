"""The oldest NVIDIA driver migagent can change MIG instances with, checked before the first change.

Every CI is created with `nvmlGpuInstanceCreateComputeInstanceWithPlacement` (explicit placements
are what make kept GIs and journaled plans exact), and CI placements are read with
`nvmlGpuInstanceGetComputeInstancePossiblePlacements`; both first shipped with R510 [inf: NVML API
of CUDA 11.6, the R510 release; an R470 library does not export them]. Reading a node works on
older drivers (processes through `_v2`); changing it is refused with one line naming the floor.
"""

from __future__ import annotations

import re

from migagent.errors import NotSupportedError

DRIVER_FLOOR_MAJOR = 510
FLOOR_FUNCTION = "nvmlGpuInstanceCreateComputeInstanceWithPlacement"
_MAJOR = re.compile(r"^\s*(\d+)\.")


def driver_major(version: str) -> int | None:
    """510 for "510.47.03"; None for a version string this does not recognise."""
    match = _MAJOR.match(version)
    return int(match.group(1)) if match else None


def check_driver_floor(version: str) -> None:
    major = driver_major(version)
    if major is not None and major < DRIVER_FLOOR_MAJOR:
        raise NotSupportedError(
            f"NVIDIA driver {version} is older than R{DRIVER_FLOOR_MAJOR}, the first driver with {FLOOR_FUNCTION},"
            f" which migagent needs to change MIG instances; upgrade the driver to R{DRIVER_FLOOR_MAJOR} or later"
        )
