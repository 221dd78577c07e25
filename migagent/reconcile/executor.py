"""Turn one plan step into one GpuDriver call, resolving ids from a fresh observation.

Steps name GPU and compute instances by placement; the NVML ids they need are read from the
observation taken just before the call, so a step journaled before a crash (or before another
process recreated an instance) acts on what is there now, never on a remembered id.
"""

from __future__ import annotations

from migagent.errors import InUseError, PermanentError, ResetRequiredError
from migagent.layout.observed import Observation, ObservedCi, ObservedGi
from migagent.nvml.mode import ModeActivation
from migagent.planning import Plan
from migagent.planning.steps import Step, StepKind
from migagent.reconcile.ports import NodeDriver


def precondition_failure(step: Step, observation: Observation) -> str | None:
    """Why `step` (not yet done) cannot run on this node now, or None when it can.

    A failing precondition means the node is not where the plan expected it to be at this step
    (someone else changed it, or the journal is older than the node): the engine plans again.
    """
    gpu = observation.gpu(step.gpu)
    match step.kind:
        case StepKind.CREATE_GI:
            if not gpu.mig_current:
                return f"GPU {step.gpu}: MIG mode is not enabled, so no GPU instance can be created"
            assert step.gi_placement is not None
            taken = [gi for gi in gpu.gpu_instances if gi.placement.overlaps(step.gi_placement)]
            if taken:
                return f"GPU {step.gpu}: slices {step.gi_placement} are held by GPU instance {taken[0].id}"
        case StepKind.CREATE_CI:
            gi = _gi(step, observation)
            if gi is None:
                return f"GPU {step.gpu}: no GPU instance {step.gi_profile_id}@{step.gi_placement} to hold the CI"
            assert step.ci_placement is not None
            if any(ci.placement.overlaps(step.ci_placement) for ci in gi.compute_instances):
                return f"GPU {step.gpu}: compute slices {step.ci_placement} of GI {gi.id} are taken"
        case StepKind.RESET_GPU:
            if gpu.mig_pending != step.mig_enabled:
                return f"GPU {step.gpu}: the MIG mode a reset would activate is not pending"
        case StepKind.DESTROY_CI | StepKind.DESTROY_GI | StepKind.SET_MODE:
            pass
    return None


def lost_kept_instance(plan: Plan, observation: Observation) -> str | None:
    """Which GI the plan keeps is no longer on the node as it was (profile, placement, CIs); None if all are.

    A journaled plan chose what to destroy and where to create around the GIs it keeps; when one
    of them has gone or changed since, resuming would follow choices a fresh plan might not make.
    """
    present = {gpu.index: gpu for gpu in observation.gpus}
    for gpu_plan in plan.gpus:
        gpu = present.get(gpu_plan.gpu)
        for kept in gpu_plan.keep:
            seen = None if gpu is None else gpu.gi_at(kept.placement)
            if seen is None or (seen.profile_id, seen.ci_profile_ids) != (kept.profile_id, kept.ci_profile_ids):
                return f"GPU {gpu_plan.gpu}: the plan keeps GPU instance {kept.profile_id}@{kept.placement}, now gone"
    return None


def journal_position_mismatch(plan: Plan, step_index: int, observation: Observation) -> str | None:
    """Why the node is not where a journal standing at `step_index` says it is; None when it is.

    Every step before the index must show as done, except a destroy that a later step of the plan
    undoes on purpose (a GI destroyed and recreated with other CIs at the same placement).
    A GPU can move backwards under a journal: an admin's reset, a driver reload, a GPU that
    forgot. Resuming then would run step `step_index` on a node that lacks what it builds on.
    """
    present = {gpu.index for gpu in observation.gpus}
    for position, step in enumerate(plan.steps[:step_index]):
        if step.gpu not in present:
            return f"the journal's plan acts on GPU {step.gpu}, which the node no longer has"
        # The rebuilding step may be at or past the index: the node can be ahead of its journal.
        if not step.is_done(observation) and not _rebuilt_later(step, plan.steps[position + 1 :]):
            return f"the journal counts '{step.describe()}' as done but the node does not show it"
    return None


def _rebuilt_later(step: Step, later: tuple[Step, ...]) -> bool:
    """A destroy whose GI (same profile, same placement) a later step creates again."""
    if step.kind not in (StepKind.DESTROY_CI, StepKind.DESTROY_GI):
        return False
    return any(
        s.kind is StepKind.CREATE_GI
        and (s.gpu, s.gi_profile_id, s.gi_placement) == (step.gpu, step.gi_profile_id, step.gi_placement)
        for s in later
    )


def execute_step(driver: NodeDriver, step: Step, observation: Observation) -> None:
    """Run `step` against `driver`; ids come from `observation`, which must be fresh."""
    match step.kind:
        case StepKind.CREATE_GI:
            assert step.gi_profile_id is not None
            assert step.gi_placement is not None
            driver.create_gpu_instance(step.gpu, profile_id=step.gi_profile_id, placement=step.gi_placement)
        case StepKind.CREATE_CI:
            assert step.ci_profile_id is not None
            driver.create_compute_instance(
                step.gpu,
                gi_id=_require_gi(step, observation).id,
                profile_id=step.ci_profile_id,
                placement=step.ci_placement,
            )
        case StepKind.DESTROY_CI:
            gi = _require_gi(step, observation)
            driver.destroy_compute_instance(step.gpu, gi_id=gi.id, ci_id=_require_ci(step, gi).id)
        case StepKind.DESTROY_GI:
            driver.destroy_gpu_instance(step.gpu, gi_id=_require_gi(step, observation).id)
        case StepKind.SET_MODE:
            _set_mode(driver, step, observation)
        case StepKind.RESET_GPU:
            driver.reset_gpu(step.gpu)


def _set_mode(driver: NodeDriver, step: Step, observation: Observation) -> None:
    assert step.mig_enabled is not None
    activation = driver.set_mig_mode(step.gpu, enabled=step.mig_enabled)
    if activation is ModeActivation.REBOOT_REQUIRED:
        raise ResetRequiredError(
            f"GPU {step.gpu}: the MIG mode change is pending and this platform cannot reset the GPU"
            " (pass-through VM?); it activates after a reboot"
        )
    if activation is ModeActivation.PENDING_RESET and not observation.gpu(step.gpu).mode_change_needs_reset:
        # Hopper and later switch in place; left pending, something held the GPU: a reset activates
        # it (mig-parted's fallback), or says with each reason what holds the GPU.
        try:
            driver.reset_gpu(step.gpu)
        except InUseError as exc:
            raise InUseError(
                f"GPU {step.gpu}: the MIG mode change stayed pending (the GPU is in use) and the reset that"
                f" would activate it was refused: {exc}"
            ) from exc


def _gi(step: Step, observation: Observation) -> ObservedGi | None:
    if step.gi_placement is None:
        return None
    gi = observation.gpu(step.gpu).gi_at(step.gi_placement)
    return gi if gi is not None and gi.profile_id == step.gi_profile_id else None


def _require_gi(step: Step, observation: Observation) -> ObservedGi:
    gi = _gi(step, observation)
    if gi is None:
        raise PermanentError(f"{step.describe()}: no GPU instance at that placement on the node")
    return gi


def _require_ci(step: Step, gi: ObservedGi) -> ObservedCi:
    for ci in gi.compute_instances:
        if ci.profile_id == step.ci_profile_id and ci.placement == step.ci_placement:
            return ci
    raise PermanentError(f"{step.describe()}: no such compute instance in GPU instance {gi.id}")
