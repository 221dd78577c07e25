"""From an observation and a desired layout to a plan: the smallest set of steps, in a safe order.

Per GPU the layout selects (GPUs it does not select are left alone):

* MIG mode: a set-mode step only where the pending mode differs from the target (or, on Hopper+,
  where a requested mode did not activate); a reset step only where the GPU activates a mode
  change through a reset (Ampere) and the current mode is not yet the target. When the current
  mode changes, every existing GI goes first.
* GPU instances: the solver evicts the fewest workloads (pods per GI, `workloads`), then keeps
  every other existing GI that can stay; resets depend only on the mode, not on the packing.
  A GI counts as kept only with the same profile, the same placement and the same CI profile
  multiset; a GI whose CIs differ is destroyed and recreated rather than edited in place, which
  keeps the plan simple and every step's done-test exact.

Steps run node-wide in the order destroy-CI, destroy-GI, set-mode, reset, create-GI (largest
first), create-CI, each by GPU index. A layout that cannot fit raises LayoutDoesNotFitError before
any step exists, naming the GPU and the closest layout that would fit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from migagent.catalog.model import Placement, ProfileTable
from migagent.errors import InvalidLayoutError, LayoutDoesNotFitError
from migagent.layout.desired import DesiredGi, DesiredGpu, DesiredNode
from migagent.layout.observed import Observation, ObservedGi, ObservedGpu
from migagent.planning.model import GpuPlan, Plan
from migagent.planning.naming import describe_multiset
from migagent.planning.rules import place_compute_instances
from migagent.planning.solver import PlacedGi, closest_fitting, placement_problem, solve
from migagent.planning.steps import STEP_ORDER, Step, StepKind


def gpu_label(gpu: ObservedGpu) -> str:
    return f"GPU {gpu.index} ({gpu.name})"


@dataclass(frozen=True)
class _ModeDecision:
    set_mode: bool
    reset: bool
    clears_instances: bool


def _decide_mode(gpu: ObservedGpu, target: bool) -> _ModeDecision:
    changes = gpu.mig_current != target
    # Hopper+ activates in place; a pending mode there means activation failed and must be retried.
    retry_in_place = changes and not gpu.mode_change_needs_reset
    return _ModeDecision(
        set_mode=gpu.mig_pending != target or retry_in_place,
        reset=changes and gpu.mode_change_needs_reset,
        clears_instances=changes,
    )


def _refusal(gpu: ObservedGpu, table: ProfileTable, desired: tuple[DesiredGi, ...]) -> LayoutDoesNotFitError:
    reason = placement_problem(table, desired) or "no legal placement exists"
    closest = closest_fitting(table, desired)
    dropped = list((Counter(desired) - Counter(closest)).elements())
    return LayoutDoesNotFitError(
        f"{gpu_label(gpu)}: {describe_multiset(table, desired)} does not fit ({reason}); closest layout that"
        f" fits: {describe_multiset(table, closest)} (drop {describe_multiset(table, dropped)})"
    )


GiWorkloads = Mapping[tuple[int, Placement], int]
"""Pods holding each existing GI, by (GPU index, GI placement): what destroying it would evict."""


def _target(
    gpu: ObservedGpu, want: DesiredGpu, existing: tuple[ObservedGi, ...], workloads: Mapping[Placement, int]
) -> tuple[PlacedGi, ...]:
    """Placements for the desired GIs; raises when they cannot all exist on this GPU."""
    if not want.gpu_instances:
        return ()
    if gpu.profiles is None:
        raise LayoutDoesNotFitError(
            f"{gpu_label(gpu)}: its MIG profile table is unknown (NVML did not list its profiles, as older"
            f" drivers do while MIG is disabled), so {len(want.gpu_instances)} GPU instance(s) cannot be placed;"
            " enable MIG mode on it first, or plan offline for its GPU model"
        )
    solution = solve(gpu.profiles, existing=existing, desired=want.gpu_instances, workloads=workloads)
    if solution is None:
        raise _refusal(gpu, gpu.profiles, want.gpu_instances)
    return solution.placed


def _check_selectable(gpu: ObservedGpu, want: DesiredGpu) -> None:
    if not gpu.mig_capable and (want.mig_enabled or want.gpu_instances):
        raise LayoutDoesNotFitError(
            f"{gpu_label(gpu)} does not support MIG; select only MIG-capable GPUs or set mig-enabled: false for it"
        )
    if not want.mig_enabled and want.gpu_instances:
        raise LayoutDoesNotFitError(
            f"{gpu_label(gpu)}: a layout with MIG disabled cannot hold {len(want.gpu_instances)} GPU instance(s);"
            " set mig-enabled: true or remove its mig-devices"
        )


def _destroy_steps(gpu: int, gis: tuple[ObservedGi, ...]) -> list[Step]:
    steps: list[Step] = []
    for gi in gis:
        for ci in sorted(gi.compute_instances, key=lambda ci: ci.placement):
            steps.append(
                Step(
                    StepKind.DESTROY_CI,
                    gpu,
                    gi_profile_id=gi.profile_id,
                    gi_placement=gi.placement,
                    ci_profile_id=ci.profile_id,
                    ci_placement=ci.placement,
                )
            )
        steps.append(Step(StepKind.DESTROY_GI, gpu, gi_profile_id=gi.profile_id, gi_placement=gi.placement))
    return steps


def _create_steps(gpu: int, table: ProfileTable | None, created: tuple[PlacedGi, ...]) -> list[Step]:
    steps: list[Step] = []
    for placed in created:
        gi, placement = placed.desired, placed.placement
        steps.append(Step(StepKind.CREATE_GI, gpu, gi_profile_id=gi.profile_id, gi_placement=placement))
        profile = None if table is None else table.gi_profile(gi.profile_id)
        cis = None if profile is None else place_compute_instances(profile, gi.ci_profile_ids)
        if cis is None:  # pragma: no cover - the solver already refused such a GI
            raise AssertionError(f"GPU {gpu}: no CI placement for {gi}")
        for ci_id, ci_placement in cis:
            steps.append(
                Step(
                    StepKind.CREATE_CI,
                    gpu,
                    gi_profile_id=gi.profile_id,
                    gi_placement=placement,
                    ci_profile_id=ci_id,
                    ci_placement=ci_placement,
                )
            )
    return steps


def plan_gpu(
    gpu: ObservedGpu, want: DesiredGpu, workloads: GiWorkloads | None = None
) -> tuple[GpuPlan, list[Step]]:
    """The plan and steps for one GPU (steps in kind order; `plan` merges GPUs)."""
    _check_selectable(gpu, want)
    if not gpu.mig_capable:
        return GpuPlan(gpu=gpu.index, keep=(), destroy=(), create=(), mode_change=None, reset=False), []
    mode = _decide_mode(gpu, want.mig_enabled)
    existing = () if mode.clears_instances else gpu.gpu_instances
    on_gpu = {placement: n for (index, placement), n in (workloads or {}).items() if index == gpu.index}
    placed = _target(gpu, want, existing, on_gpu)
    kept = {id(p.kept) for p in placed if p.kept is not None}
    keep = tuple(sorted((gi for gi in gpu.gpu_instances if id(gi) in kept), key=lambda gi: gi.placement))
    destroy = tuple(sorted((gi for gi in gpu.gpu_instances if id(gi) not in kept), key=lambda gi: gi.placement))
    created = tuple(p for p in placed if p.kept is None)
    steps = _destroy_steps(gpu.index, destroy)
    if mode.set_mode:
        steps.append(Step(StepKind.SET_MODE, gpu.index, mig_enabled=want.mig_enabled))
    if mode.reset:
        steps.append(Step(StepKind.RESET_GPU, gpu.index, mig_enabled=want.mig_enabled))
    steps += _create_steps(gpu.index, gpu.profiles, created)
    gpu_plan = GpuPlan(
        gpu=gpu.index,
        keep=keep,
        destroy=destroy,
        create=tuple((p.desired, p.placement) for p in created),
        mode_change=want.mig_enabled if mode.set_mode else None,
        reset=mode.reset,
    )
    return gpu_plan, steps


def _observed_gpu(observation: Observation, index: int) -> ObservedGpu:
    try:
        return observation.gpu(index)
    except KeyError:
        present = ", ".join(str(g.index) for g in observation.gpus) or "none"
        raise LayoutDoesNotFitError(
            f"GPU {index} is selected by the layout but this node has no such GPU (present: {present})"
        ) from None


def plan(observation: Observation, desired: DesiredNode, *, workloads: GiWorkloads | None = None) -> Plan:
    """The plan that turns `observation` into `desired`; raises LayoutDoesNotFitError before any step.

    With `workloads` (pods per GI), the packing evicts the fewest pods, then destroys the fewest GIs."""
    indices = [g.index for g in desired.gpus]
    repeated = sorted({i for i in indices if indices.count(i) > 1})
    if repeated:
        listed = ", ".join(map(str, repeated))
        raise InvalidLayoutError(f"GPU(s) {listed} selected more than once in the desired layout")
    gpu_plans: list[GpuPlan] = []
    steps: list[Step] = []
    for want in sorted(desired.gpus, key=lambda g: g.index):
        gpu_plan, gpu_steps = plan_gpu(_observed_gpu(observation, want.index), want, workloads)
        gpu_plans.append(gpu_plan)
        steps += gpu_steps
    # Stable sort: within one kind and GPU the per-GPU order (largest first, CIs after their GI) stays.
    ordered = sorted(steps, key=lambda step: (STEP_ORDER.index(step.kind), step.gpu))
    return Plan(gpus=tuple(gpu_plans), steps=tuple(ordered))
