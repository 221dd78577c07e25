"""The drain of one change: scoped again once the node is cordoned (a pod scheduled since the gate
ran is seen, and gated), then only the pods on devices the plan disturbs are evicted, each with an
Event saying which device it held and what the plan does to it."""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from migagent.kube.names import ConditionReason, EventReason
from migagent.kube.status import StatusReporter
from migagent.layout.observed import Observation
from migagent.planning import Plan
from migagent.runtime.gate import decide_drain
from migagent.runtime.notes import eviction_reasons, gpu_pods_left_alone
from migagent.runtime.ports import AgentPorts, AgentSettings

log = structlog.get_logger(__name__)


def drain_for_change(
    ports: AgentPorts,
    settings: AgentSettings,
    status: StatusReporter,
    *,
    steps: Plan,
    observation: Observation,
    stop: threading.Event | None,
    checkpoint: Callable[[], None],
) -> None:
    pods = ports.api.list_pods_on_node()
    holdings = ports.pod_resources.list()
    chosen = decide_drain(ports.api, steps, observation, holdings, pods, force_delete=settings.force_delete).evict
    left = gpu_pods_left_alone(pods, chosen)
    log.info("drain_scoped", evict=[str(p.ref) for p in chosen], left_alone=[str(r) for r in left])
    if not chosen:
        return
    reasons = eviction_reasons(chosen, holdings, observation, steps)
    status.progress(
        ConditionReason.DRAINING,
        f"evicting {len(chosen)} pod(s) on devices the change removes: {', '.join(str(p.ref) for p in chosen)};"
        f" {len(left)} other GPU pod(s) keep running",
    )
    result = ports.drainer.drain(
        list(chosen), timeout_s=settings.drain_timeout_s, force_delete=settings.force_delete, stop=stop,
        checkpoint=checkpoint,
    )
    ports.listener.pods_evicted(len(result.removed))
    ports.listener.drain_wait(result.waited_s)
    for ref in result.removed:
        status.event(EventReason.POD_EVICTED, f"pod {ref} evicted: {reasons.get(ref, 'holds a device')}")
