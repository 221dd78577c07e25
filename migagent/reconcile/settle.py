"""Leave every GPU consistent when a change is abandoned half way: no GPU instance without its
compute instances.

The engine creates a GI and then its CIs as separate journaled steps, so an apply stopped between
them (the label changed to a typo or removed at that safe point, a failure) leaves a bare GI: it
holds slices and memory, yet the device plugin advertises nothing for it. Before the agent undoes
an abandoned attempt (resumes the plugin, uncordons), each bare GI the change made is destroyed (its
journal says which: a bare GI another tool left, even on a GPU the layout does not select, stays);
the next attempt plans from what is left.
"""

from __future__ import annotations

from typing import Protocol

import structlog

from migagent.catalog.model import Placement
from migagent.layout.observed import Observation
from migagent.planning import Plan

log = structlog.get_logger(__name__)


class BareInstanceDriver(Protocol):
    def observe(self) -> Observation: ...

    def destroy_gpu_instance(self, gpu: int, *, gi_id: int) -> None: ...


def made_by(plan: Plan | None, steps_done: int) -> frozenset[tuple[int, Placement]]:
    """The GPU instances (GPU, placement) the first `steps_done` steps of `plan` created or emptied."""
    steps = () if plan is None else plan.steps[:steps_done]
    return frozenset((s.gpu, s.gi_placement) for s in steps if s.gi_placement is not None)


def destroy_bare_instances(
    driver: BareInstanceDriver, made: frozenset[tuple[int, Placement]]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Destroy each GPU instance of `made` that has no compute instance. Returns what was destroyed
    and the bare GPU instances left: another tool's (or an earlier run's), on a GPU this change may
    not even select, are never this change's to remove."""
    done: list[str] = []
    left: list[str] = []
    for gpu in driver.observe().gpus if made else ():
        for gi in gpu.gpu_instances:
            if gi.compute_instances:
                continue
            where = f"GPU {gpu.index}: GPU instance {gi.id} at slot {gi.placement.start}"
            if (gpu.index, gi.placement) not in made:
                left.append(where)
                continue
            driver.destroy_gpu_instance(gpu.index, gi_id=gi.id)
            done.append(f"{where} had no compute instance")
            log.warning("bare_gpu_instance_destroyed", gpu=gpu.index, gi_id=gi.id, placement=str(gi.placement))
    return tuple(done), tuple(left)
