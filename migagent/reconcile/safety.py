"""The safety gate: no step runs while a process would lose the MIG device it is running on.

Checked once for the whole remaining plan, before the first mutation, so a refused apply leaves the
node exactly as it was (mig-parted instead fails half-way, on NVML's IN_USE, with some GPUs already
torn down).
"""

from __future__ import annotations

from dataclasses import dataclass

from migagent.errors import InUseError
from migagent.layout.observed import Observation, ObservedCi, ObservedGi, ObservedGpu
from migagent.planning.steps import Step, StepKind


@dataclass(frozen=True, order=True)
class BlockingProcess:
    gpu: int
    mig_uuid: str
    pid: int

    def describe(self) -> str:
        return f"pid {self.pid} on {self.mig_uuid} (GPU {self.gpu})"


def blocking_processes(steps: tuple[Step, ...], observation: Observation) -> tuple[BlockingProcess, ...]:
    """Every process running on an instance that `steps` would destroy, reset or re-mode."""
    found: set[BlockingProcess] = set()
    for step in steps:
        found.update(_processes_hit_by(step, observation.gpu(step.gpu)))
    return tuple(sorted(found))


def check_nothing_in_use(steps: tuple[Step, ...], observation: Observation) -> None:
    blocking = blocking_processes(steps, observation)
    if blocking:
        listing = "; ".join(p.describe() for p in blocking)
        raise InUseError(
            f"refusing to change MIG devices that are in use: {listing}."
            " Stop these processes (or drain their pods) and apply again; nothing was changed"
        )


def _processes_hit_by(step: Step, gpu: ObservedGpu) -> set[BlockingProcess]:
    if step.kind in (StepKind.SET_MODE, StepKind.RESET_GPU):
        # A mode change or reset takes every instance, and with MIG off the whole GPU, from its processes.
        whole_gpu = {BlockingProcess(gpu=gpu.index, mig_uuid=gpu.uuid, pid=p.pid) for p in gpu.processes}
        return whole_gpu | _on_instances(step, gpu, gpu.gpu_instances)
    if step.kind in (StepKind.DESTROY_GI, StepKind.DESTROY_CI) and step.gi_placement is not None:
        gi = gpu.gi_at(step.gi_placement)
        return _on_instances(step, gpu, () if gi is None or gi.profile_id != step.gi_profile_id else (gi,))
    return set()


def _on_instances(step: Step, gpu: ObservedGpu, gis: tuple[ObservedGi, ...]) -> set[BlockingProcess]:
    return {
        BlockingProcess(gpu=gpu.index, mig_uuid=uuid, pid=process.pid)
        for gi in gis
        for uuid, process in gi.processes
        if step.kind is not StepKind.DESTROY_CI or _on_ci(step, gi.compute_instances, uuid)
    }


def _on_ci(step: Step, cis: tuple[ObservedCi, ...], uuid: str) -> bool:
    """Whether MIG device `uuid` is the compute instance a destroy-ci step removes."""
    return any(
        ci.uuid == uuid and ci.profile_id == step.ci_profile_id and ci.placement == step.ci_placement for ci in cis
    )
