"""Wait for the GPU Operator's driver and toolkit before the first NVML call, instead of crash-looping.

The operator's validator writes marker files under /run/nvidia/validations on the host once the
driver is loaded (`driver-ready`) and the container toolkit is set up (`toolkit-ready`); its
mig-manager waits for `toolkit-ready` in an init container. The agent waits for both, bounded,
saying in its Node condition and logs what it waits for; on timeout it fails with that reason
(the pod restarts and waits again).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from migagent.clock import Clock
from migagent.errors import TransientError
from migagent.retrying import poll_until

log = structlog.get_logger(__name__)

READY_MARKERS = ("driver-ready", "toolkit-ready")
DEFAULT_VALIDATIONS_DIR = Path("/run/nvidia/validations")


class OperatorNotReadyError(TransientError):
    """The operator's driver or toolkit ready marker did not appear in time."""


def missing_markers(directory: Path, names: Sequence[str] = READY_MARKERS) -> list[str]:
    return [name for name in names if not (directory / name).exists()]


def wait_for_ready_markers(
    directory: Path,
    *,
    timeout_s: float,
    clock: Clock,
    report: Callable[[str], None],
    names: Sequence[str] = READY_MARKERS,
    poll_interval_s: float = 5.0,
    stop: threading.Event | None = None,
) -> None:
    """Return once every marker exists; `report` is told what is awaited (the Node condition)."""
    missing = missing_markers(directory, names)
    if not missing:
        return
    message = (
        f"waiting up to {timeout_s:g}s for the GPU Operator's {', '.join(missing)} marker(s) in {directory}"
        " before using NVML (driver and container toolkit not ready yet)"
    )
    log.info("waiting_for_operator_ready_markers", missing=missing, directory=str(directory), timeout_s=timeout_s)
    report(message)

    def ready() -> bool | None:
        return True if not missing_markers(directory, names) else None

    _, in_time = poll_until(ready, clock=clock, timeout_s=timeout_s, interval_s=poll_interval_s, stop=stop)
    if not in_time:
        still = missing_markers(directory, names)
        failure = (
            f"the GPU Operator's {', '.join(still)} marker(s) did not appear in {directory} within {timeout_s:g}s:"
            " is the operator's driver (and its validator) running on this node?"
        )
        report(failure)
        raise OperatorNotReadyError(failure, delay=30.0)
    log.info("operator_ready", directory=str(directory))
