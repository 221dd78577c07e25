"""Where the GPUs stand when a write the apply depends on is refused, said next to the refusal.

A full or read-only disk can refuse any of the apply's writes: the journal's first record, a
step's progress line, the final record once every step is done, or the simulated node's state. The
storage error names the path and the errno; the operator also needs the true state of the GPUs,
read again from the node: untouched, part way to the layout (which GPUs), or already at it (then
only the record is missing and nothing is left to do once the disk has room).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from migagent.errors import MigAgentError, StorageError
from migagent.layout.gpus import gpus_named
from migagent.layout.observed import Observation, ObservedGpu
from migagent.planning import Plan
from migagent.reconcile.settle import BareInstanceDriver, destroy_bare_instances, made_by


@dataclass(frozen=True)
class GpuState:
    """What the node holds when the apply stopped, as read from it again."""

    config_name: str
    steps_total: int
    steps_done: int
    """Steps of the plan known done (the journal's index: this run's and any earlier run's)."""
    at_target: bool | None
    """Whether the node matches the layout; None when it could not be read."""
    changed_gpus: tuple[int, ...] = ()
    """GPUs that differ from what this apply found when it began."""
    bare_destroyed: int = 0
    """GPU instances left without compute instances, destroyed before stopping."""

    def clause(self) -> str:
        if self.at_target:
            return (f"the GPUs match config {self.config_name} all the same: nothing is left to do, and the next"
                    " apply records it once the disk has room")
        if self.at_target is None:
            return "the GPUs could not be read again; run `migagent assert` to see where they stand"
        if not self.changed_gpus:
            return "no GPU was changed by this apply"
        text = (f"the apply stopped after {self.steps_done} of {self.steps_total} step(s),"
                f" {gpus_named(self.changed_gpus)} part way to config {self.config_name}")
        if self.bare_destroyed:
            text += f"; {self.bare_destroyed} GPU instance(s) left without compute instances were destroyed"
        return text + "; once the disk has room, run the same apply again to finish"


def with_gpu_state(error: StorageError, state: GpuState) -> StorageError:
    """`error` (path and errno kept) followed by where the GPUs stand."""
    return StorageError(f"{error}; {state.clause()}", path=error.path, errno=error.errno)


def _layout(gpu: ObservedGpu) -> tuple[object, ...]:
    """What an apply changes on a GPU: its MIG modes and its instances (not ids, not processes)."""
    instances = sorted(
        (gi.profile_id, gi.placement.start, gi.placement.size, gi.ci_profile_ids) for gi in gpu.gpu_instances
    )
    return (gpu.mig_current, gpu.mig_pending, tuple(instances))


def changed_gpus(before: Observation, now: Observation) -> tuple[int, ...]:
    """GPUs whose modes or instances differ between two observations of the node."""
    then = {gpu.index: _layout(gpu) for gpu in before.gpus}
    return tuple(gpu.index for gpu in now.gpus if then.get(gpu.index) != _layout(gpu))


def observe_where_stopped(
    driver: BareInstanceDriver,
    at_target: Callable[[Observation], bool],
    *,
    before: Observation | None,
    config_name: str,
    plan: Plan | None,
    steps_done: int,
    log: Any,
) -> GpuState:
    """The true state of the GPUs after a refused write: GPU instances the apply made and left without
    compute instances destroyed first (no stop leaves one), then the node read against the layout
    and against `before`, what the apply found. A failure of either is logged and leaves the state
    less certain, never hidden."""
    state = GpuState(config_name=config_name, steps_total=0 if plan is None else len(plan.steps),
                     steps_done=steps_done, at_target=None)
    try:
        bare, _ = destroy_bare_instances(driver, made_by(plan, steps_done))
        now = driver.observe()
        return GpuState(
            config_name=config_name, steps_total=state.steps_total, steps_done=steps_done, at_target=at_target(now),
            changed_gpus=changed_gpus(before, now) if before is not None else tuple(g.index for g in now.gpus),
            bare_destroyed=len(bare),
        )
    except MigAgentError as exc:
        log.error("gpus_not_read_after_storage_error", error=str(exc))
        return state
