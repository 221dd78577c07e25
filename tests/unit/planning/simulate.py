"""Test-only helpers: apply plan steps to an Observation in memory, with NVML's rules checked.

This is deliberately independent of migagent.planning's search: it re-checks every placement
against the profile table itself, so a wrong plan fails here rather than being trusted.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence

from migagent.catalog.model import MediaAttribute, Placement, ProfileTable
from migagent.layout.desired import DesiredGi, DesiredGpu, DesiredNode
from migagent.layout.observed import Observation, ObservedCi, ObservedGi, ObservedGpu, ObservedProcess
from migagent.planning.solver import enumerate_fitting_multisets
from migagent.planning.steps import Step, StepKind


class IllegalStepError(AssertionError):
    """A step NVML would refuse (overlap, illegal placement, destroy with children, ...)."""


def _replace_gpu(observation: Observation, gpu: ObservedGpu) -> Observation:
    return Observation(gpus=tuple(gpu if g.index == gpu.index else g for g in observation.gpus))


def _table(gpu: ObservedGpu) -> ProfileTable:
    if gpu.profiles is None:
        raise IllegalStepError(f"GPU {gpu.index} has no profile table")
    return gpu.profiles


def _gi(gpu: ObservedGpu, step: Step) -> ObservedGi:
    assert step.gi_placement is not None
    gi = gpu.gi_at(step.gi_placement)
    if gi is None or gi.profile_id != step.gi_profile_id:
        raise IllegalStepError(f"no GI {step.gi_profile_id}@{step.gi_placement} on GPU {gpu.index}")
    return gi


def _with_gi(gpu: ObservedGpu, old: ObservedGi | None, new: ObservedGi | None) -> ObservedGpu:
    gis = [g for g in gpu.gpu_instances if g is not old]
    if new is not None:
        gis.append(new)
    return dataclasses.replace(gpu, gpu_instances=tuple(sorted(gis, key=lambda g: g.placement)))


def _check_media(table: ProfileTable, profile_ids: Sequence[int]) -> None:
    media = [p.media for p in (table.gi_profile(i) for i in profile_ids) if p is not None]
    exclusive = [m for m in media if m in (MediaAttribute.ME, MediaAttribute.ME_ALL)]
    if len(exclusive) > 1:
        raise IllegalStepError("two GIs hold media engines")
    if MediaAttribute.ME_ALL in media and any(
        m is not MediaAttribute.NO_ME for m in media if m is not MediaAttribute.ME_ALL
    ):
        raise IllegalStepError("+me.all GI next to a GI that is not -me")


def _create_gi(gpu: ObservedGpu, step: Step) -> ObservedGpu:
    table = _table(gpu)
    profile = table.gi_profile(step.gi_profile_id or 0)
    placement = step.gi_placement
    if not gpu.mig_current or profile is None or placement not in profile.placements:
        raise IllegalStepError(f"illegal GI creation {step.describe()}")
    if any(g.placement.overlaps(placement) for g in gpu.gpu_instances):
        raise IllegalStepError(f"GI overlap {step.describe()}")
    same = [g for g in gpu.gpu_instances if g.profile_id == profile.id]
    if len(same) >= profile.max_instances:
        raise IllegalStepError(f"max instances exceeded {step.describe()}")
    _check_media(table, [g.profile_id for g in gpu.gpu_instances] + [profile.id])
    used = {g.id for g in gpu.gpu_instances}
    gi_id = next(i for i in range(1, 64) if i not in used)
    return _with_gi(gpu, None, ObservedGi(id=gi_id, profile_id=profile.id, placement=placement))


def _create_ci(gpu: ObservedGpu, step: Step) -> ObservedGpu:
    gi = _gi(gpu, step)
    profile = _table(gpu).gi_profile(gi.profile_id)
    assert profile is not None
    assert step.ci_placement is not None
    ci_profile = profile.ci_profile(step.ci_profile_id or 0)
    if ci_profile is None or step.ci_placement not in ci_profile.placements:
        raise IllegalStepError(f"illegal CI placement {step.describe()}")
    if step.ci_placement.end > profile.slices:
        raise IllegalStepError(f"CI outside its GI {step.describe()}")
    if any(ci.placement.overlaps(step.ci_placement) for ci in gi.compute_instances):
        raise IllegalStepError(f"CI overlap {step.describe()}")
    if sum(ci.profile_id == ci_profile.id for ci in gi.compute_instances) >= ci_profile.max_instances:
        raise IllegalStepError(f"CI max instances exceeded {step.describe()}")
    used = {ci.id for ci in gi.compute_instances}
    ci_id = next(i for i in range(64) if i not in used)
    ci = ObservedCi(ci_id, ci_profile.id, step.ci_placement, uuid=f"MIG-{gpu.index}-{gi.id}-{ci_id}")
    return _with_gi(gpu, gi, dataclasses.replace(gi, compute_instances=(*gi.compute_instances, ci)))


def _destroy_ci(gpu: ObservedGpu, step: Step) -> ObservedGpu:
    gi = _gi(gpu, step)
    keep = [ci for ci in gi.compute_instances if ci.placement != step.ci_placement]
    if len(keep) == len(gi.compute_instances):
        raise IllegalStepError(f"no such CI {step.describe()}")
    return _with_gi(gpu, gi, dataclasses.replace(gi, compute_instances=tuple(keep)))


def _destroy_gi(gpu: ObservedGpu, step: Step) -> ObservedGpu:
    gi = _gi(gpu, step)
    if gi.compute_instances:
        raise IllegalStepError(f"GI still has CIs (NVML: IN_USE) {step.describe()}")
    return _with_gi(gpu, gi, None)


def _set_mode(gpu: ObservedGpu, step: Step, *, ampere_activates: bool) -> ObservedGpu:
    assert step.mig_enabled is not None
    if gpu.gpu_instances and step.mig_enabled != gpu.mig_current:
        raise IllegalStepError(f"mode change with GIs present {step.describe()}")
    activates = ampere_activates or not gpu.mode_change_needs_reset
    current = step.mig_enabled if activates else gpu.mig_current
    return dataclasses.replace(gpu, mig_pending=step.mig_enabled, mig_current=current)


def _reset(gpu: ObservedGpu, step: Step) -> ObservedGpu:
    if not gpu.mode_change_needs_reset:
        raise IllegalStepError(f"reset planned on a GPU that never needs one {step.describe()}")
    return dataclasses.replace(gpu, mig_current=gpu.mig_pending, gpu_instances=())


def apply_step(observation: Observation, step: Step, *, ampere_activates: bool = False) -> Observation:
    """The observation after NVML carried out `step`; raises IllegalStepError where NVML would refuse.

    ampere_activates=False models an Ampere GPU with a client attached: set-mode leaves the mode
    pending and only the reset activates it (the case that needs the reset step).
    """
    gpu = observation.gpu(step.gpu)
    match step.kind:
        case StepKind.DESTROY_CI:
            new = _destroy_ci(gpu, step)
        case StepKind.DESTROY_GI:
            new = _destroy_gi(gpu, step)
        case StepKind.SET_MODE:
            new = _set_mode(gpu, step, ampere_activates=ampere_activates)
        case StepKind.RESET_GPU:
            new = _reset(gpu, step)
        case StepKind.CREATE_GI:
            new = _create_gi(gpu, step)
        case StepKind.CREATE_CI:
            new = _create_ci(gpu, step)
    return _replace_gpu(observation, new)


def apply_all(observation: Observation, steps: Iterable[Step], *, ampere_activates: bool = False) -> Observation:
    """Apply every step, checking that each one's is_done holds right after it ran."""
    for step in steps:
        observation = apply_step(observation, step, ampere_activates=ampere_activates)
        if not step.is_done(observation):
            raise AssertionError(f"step not done after applying it: {step.describe()}")
    return observation


def desired_of(observation: Observation, indices: Iterable[int] | None = None) -> DesiredNode:
    """The desired layout that an observation already satisfies (for plan(x, x) checks)."""
    chosen = [g for g in observation.gpus if indices is None or g.index in set(indices)]
    return DesiredNode(
        gpus=tuple(
            DesiredGpu(
                index=g.index,
                mig_enabled=g.mig_current,
                gpu_instances=tuple(sorted(DesiredGi(gi.profile_id, gi.ci_profile_ids) for gi in g.gpu_instances)),
            )
            for g in chosen
        )
    )


def gi_multiset(gpu: ObservedGpu) -> list[DesiredGi]:
    return sorted(DesiredGi(gi.profile_id, gi.ci_profile_ids) for gi in gpu.gpu_instances)


def with_process(observation: Observation, *, gpu: int, placement: Placement, pid: int = 4242) -> Observation:
    """Attach a process to the first CI of the GI at `placement` (a GI that is in use)."""
    target = observation.gpu(gpu)
    gi = target.gi_at(placement)
    assert gi is not None
    assert gi.compute_instances
    first, *rest = gi.compute_instances
    busy = dataclasses.replace(first, processes=(ObservedProcess(pid=pid, used_memory_bytes=1 << 30),))
    new_gi = dataclasses.replace(gi, compute_instances=(busy, *rest))
    return _replace_gpu(observation, _with_gi(target, gi, new_gi))


@functools.cache
def fitting_multisets(table: ProfileTable) -> list[tuple[DesiredGi, ...]]:
    """enumerate_fitting_multisets, computed once per table for the whole test session."""
    return enumerate_fitting_multisets(table)
