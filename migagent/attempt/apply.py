"""The APPLY phase: the journaled engine runs the plan the gate let through, with the planner the drain
was scoped for, so it destroys exactly the GPU instances the drain emptied."""

from __future__ import annotations

from collections.abc import Callable

from migagent.attempt.drain.gate import Target
from migagent.attempt.ports import AgentPorts
from migagent.attempt.report.status import StatusReporter, plan_summary
from migagent.attempt.undo import ApplyFailedError
from migagent.node.names import EventReason
from migagent.reconcile.machine import Planned
from migagent.reconcile.result import ApplyOutcome


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
