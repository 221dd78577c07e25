"""Leave every GPU consistent when a change is abandoned half way: no GPU instance without its
compute instances.

The engine creates a GI and then its CIs as separate journaled steps, so an apply stopped between
them (the label changed to a typo or removed at that safe point, a failure) leaves a bare GI: it
holds slices and memory, yet the device plugin advertises nothing for it. Before the agent undoes
an abandoned attempt (resumes the plugin, uncordons), each bare GI is destroyed; the next attempt
plans from what is left.
"""

from __future__ import annotations

from typing import Protocol

import structlog

from migagent.layout.observed import Observation

log = structlog.get_logger(__name__)


class BareInstanceDriver(Protocol):
    def observe(self) -> Observation: ...

    def destroy_gpu_instance(self, gpu: int, *, gi_id: int) -> None: ...


def destroy_bare_instances(driver: BareInstanceDriver) -> tuple[str, ...]:
    """Destroy every GPU instance that has no compute instance; returns what was destroyed."""
    done: list[str] = []
    for gpu in driver.observe().gpus:
        for gi in gpu.gpu_instances:
            if gi.compute_instances:
                continue
            driver.destroy_gpu_instance(gpu.index, gi_id=gi.id)
            done.append(f"GPU {gpu.index}: GPU instance {gi.id} at slot {gi.placement.start} had no compute instance")
            log.warning("bare_gpu_instance_destroyed", gpu=gpu.index, gi_id=gi.id, placement=str(gi.placement))
    return tuple(done)
