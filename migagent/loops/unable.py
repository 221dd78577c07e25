"""Tell the Node the truth when the agent cannot work at all (NVML will not initialise, say).

Without this an agent that exits at start-up leaves the Node saying `success` for a layout it can
no longer see or keep, and the operator learns nothing from the cluster. The report is `failed`
with a reason naming what is missing; nothing else on the Node is touched (no cordon, no
eviction), and a failure to report is logged, never hiding the error that caused it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import structlog

from migagent.attempt.report.status import StatusReporter
from migagent.attempt.undo import AttemptMarker
from migagent.errors import MigAgentError
from migagent.node.names import ATTEMPT_ANNOTATION, ConditionReason
from migagent.node.port import KubePort

log = structlog.get_logger(__name__)


def report_unable_to_work(api: KubePort, reason: ConditionReason, message: str) -> None:
    """Write state `failed` with `reason` and `message` on our Node; log (not raise) if that fails."""
    try:
        previous = AttemptMarker.from_annotation(api.get_node().annotations.get(ATTEMPT_ANNOTATION))
        attempt = previous.number + 1 if previous is not None else 1
        StatusReporter(api).failed(reason, message, attempt=attempt)
    except Exception as error:  # the cause is what the caller raises next; this only must not hide it
        log.error("failure_not_reported", reason=str(reason), error=str(error))
        return
    log.error("agent_cannot_work", reason=str(reason), error=message)


@contextmanager
def reported_if_unable(api: KubePort, reason: ConditionReason, what: str) -> Iterator[None]:
    """Run the block; a MigAgentError from it is reported on the Node (`what: error`) and re-raised."""
    try:
        yield
    except MigAgentError as error:
        report_unable_to_work(api, reason, f"{what}: {error}")
        raise
