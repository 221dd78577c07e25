"""The two steps of a change that act on what holds the GPUs: the drain and the apply.

The drain is scoped again once the node is cordoned (a pod scheduled since the gate ran is seen,
and gated), then only the pods on devices the plan disturbs are evicted, each with an Event saying
which device it held and what the plan does to it. The apply runs the journaled engine with the
planner the drain was scoped for, so it destroys exactly the GPU instances the drain emptied."""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from migagent.attempt.drain.gate import Target, decide_drain
from migagent.attempt.notes import eviction_reasons, gpu_pods_left_alone, plan_summary
from migagent.attempt.ports import AgentPorts, AgentSettings
from migagent.attempt.report.status import StatusReporter
from migagent.attempt.undo import ApplyFailedError
from migagent.layout.observed import Observation
from migagent.node.names import ConditionReason, EventReason
from migagent.planning import Plan
from migagent.reconcile.machine import Planned
from migagent.reconcile.result import ApplyOutcome

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
    chosen = decide_drain(
        ports.api, steps, observation, holdings, pods,
        force_delete=settings.force_delete, gate=settings.gate, processes=False,
    ).evict
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


def apply_change(ports: AgentPorts, status: StatusReporter, target: Target, *, checkpoint: Callable[[], None]) -> bool:
    """Run the engine; True when it asked for a reboot to activate a MIG mode change."""
    name, steps = target.name, target.steps
    result = ports.engine.apply(
        target.desired,
        layout_hash=target.layout_hash,
        config_name=name,
        planner=target.planner,
        checkpoint=checkpoint,
        planned=Planned(steps, target.observation),
    )
    kept, destroyed, created = (sum(len(getattr(g, k)) for g in steps.gpus) for k in ("keep", "destroy", "create"))
    ports.listener.instances_changed(kept, destroyed, created)
    ports.listener.gpus_reset(sum(1 for g in steps.gpus if g.reset))
    if result.outcome is ApplyOutcome.REBOOT_REQUESTED:
        status.rebooting(f"layout {name}: {result.error or 'a reboot activates the MIG mode change'}")
        return True
    if result.outcome is not ApplyOutcome.CONVERGED:
        raise ApplyFailedError(result.error or f"apply ended {result.outcome.value}")
    status.event(EventReason.GPUS_RECONFIGURED, f"GPUs now hold layout {name}: {plan_summary(steps)}")
    return False
