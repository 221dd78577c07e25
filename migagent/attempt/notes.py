"""Human-readable reasons for what an attempt does, and the one check that needs the consumer's view.

`eviction_reasons` says, per pod the drain moves, which device it holds and what the plan does to
it, so Events and the demo can show why a pod moved (and, by omission, why the others stayed).
`check_advertisable` refuses a layout the device plugin, under its MIG strategy, could never
advertise (single: a node that is not uniform) or would advertise as something it is not (mixed:
a compute instance smaller than its GI is advertised as the whole GI's resource), before anything
on the node is touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from migagent.attempt.advertise.expected import NotAdvertisableError, observed_devices
from migagent.attempt.drain.drainer import PodDeviceHolding
from migagent.catalog.model import Placement
from migagent.layout.desired import DesiredGpu, DesiredNode
from migagent.layout.observed import Observation, ObservedGpu
from migagent.layout.profile import MigProfile, ci_profile_name, gi_profile_name
from migagent.layout.strategy import GpuDevices, MigStrategy, renamed_by_mixed, resource_patterns, strategy_problems
from migagent.node.names import is_gpu_resource
from migagent.node.port import PodRef, PodView
from migagent.planning import Plan


def check_advertisable(desired: DesiredNode, observation: Observation, strategy: MigStrategy) -> None:
    """Raise NotAdvertisableError when the device plugin, run with `strategy`, would exit on the node
    this layout leaves: GPUs the layout selects as desired, the others as they are now."""
    gpus = [_after_change(gpu, desired.gpu(gpu.index)) for gpu in observation.gpus]
    problems = strategy_problems(strategy, gpus)
    if problems:
        raise NotAdvertisableError(
            f"the NVIDIA device plugin ({strategy} strategy) would exit on this layout and advertise nothing,"
            f" so nothing was changed: {'; '.join(problems)}"
        )
    smaller = [(gpu, p, name) for gpu, p, name in renamed_by_mixed(gpus) if not p.is_full_gi]
    if strategy is MigStrategy.MIXED and smaller:
        raise NotAdvertisableError(
            "the NVIDIA device plugin (mixed strategy, v0.18.2) would advertise compute instances smaller than"
            " their GPU instance as the whole GPU instance, so a pod asking for it would get a fraction;"
            " nothing was changed: "
            + "; ".join(
                f"{gpu} has compute instance profile {p}, advertised as {name}."
                f" Use {p.gi_name} (one compute instance per GPU instance) instead"
                for gpu, p, name in smaller
            )
        )


def _after_change(gpu: ObservedGpu, want: DesiredGpu | None) -> GpuDevices:
    if want is None:
        return observed_devices(Observation(gpus=(gpu,)))[0]
    table = gpu.profiles
    profiles: list[MigProfile] = []
    for gi in want.gpu_instances if table is not None else ():
        gi_profile = table.gi_profile(gi.profile_id) if table is not None else None
        for ci_id in gi.ci_profile_ids:
            ci_profile = gi_profile.ci_profile(ci_id) if gi_profile is not None else None
            if table is not None and gi_profile is not None and ci_profile is not None:
                profiles.append(ci_profile_name(gi_profile, ci_profile, table))
    patterns = resource_patterns(table) if table is not None else ()
    return GpuDevices(gpu.index, want.mig_enabled, tuple(profiles), patterns)


def plan_summary(plan: Plan) -> str:
    """`4 GPU(s) change: keep 8 GPU instances, destroy 20, create 8; 4 GPU(s) unchanged`."""
    changing = [g for g in plan.gpus if not g.is_unchanged]
    parts = [
        f"keep {sum(len(g.keep) for g in changing)} GPU instance(s)",
        f"destroy {sum(len(g.destroy) for g in changing)}",
        f"create {sum(len(g.create) for g in changing)}",
    ]
    modes = sum(1 for g in changing if g.mode_change is not None)
    if modes:
        parts.append(f"switch MIG mode on {modes} GPU(s)")
    unchanged = len(plan.gpus) - len(changing)
    return f"{len(changing)} GPU(s) change ({', '.join(parts)}); {unchanged} GPU(s) left as they are"


def _gi_label(gpu: ObservedGpu, placement: Placement, profile_id: int) -> str:
    table = gpu.profiles
    gi_profile = table.gi_profile(profile_id) if table is not None else None
    name = str(gi_profile_name(gi_profile, table)) if table is not None and gi_profile is not None else "GI"
    slots = f"slot {placement.start}" if placement.size == 1 else f"slots {placement.start}-{placement.end - 1}"
    return f"{name} at {slots}"


def _device_reason(device_id: str, observation: Observation, plan: Plan) -> str | None:
    """What the plan does to the device `device_id`, or None when it leaves it alone."""
    for gpu in observation.gpus:
        gpu_plan = plan.gpu(gpu.index)
        if gpu.uuid == device_id:
            return None if gpu_plan is None or gpu_plan.is_unchanged else f"GPU {gpu.index} is reconfigured"
        for gi in gpu.gpu_instances:
            if all(ci.uuid != device_id for ci in gi.compute_instances):
                continue
            if gpu_plan is None:
                return None
            where = f"{device_id} on GPU {gpu.index} ({_gi_label(gpu, gi.placement, gi.profile_id)})"
            if gpu_plan.reset or gpu_plan.mode_change is not None:
                return f"{where}: the GPU changes MIG mode"
            if any(d.placement == gi.placement for d in gpu_plan.destroy):
                return f"{where}: the new layout destroys this GPU instance"
            return None
    return f"{device_id}: not a device of this node now"


def eviction_reasons(
    pods: Sequence[PodView], holdings: Iterable[PodDeviceHolding], observation: Observation, plan: Plan
) -> dict[PodRef, str]:
    """Per pod to evict: the devices it holds that the plan disturbs (or why it is assumed to)."""
    devices: dict[tuple[str, str], list[str]] = {}
    for holding in holdings:
        if is_gpu_resource(holding.resource_name):
            ids = [d.split("::", 1)[0] for d in holding.device_ids]
            devices.setdefault((holding.namespace, holding.name), []).extend(ids)
    reasons: dict[PodRef, str] = {}
    for pod in pods:
        held = devices.get((pod.ref.namespace, pod.ref.name), [])
        found = [r for r in (_device_reason(d, observation, plan) for d in held) if r is not None]
        if found:
            reasons[pod.ref] = "; ".join(found)
        else:
            wants = ", ".join(sorted(pod.gpu_resources)) or "GPU resources"
            reasons[pod.ref] = f"requests {wants} but the kubelet does not say which device: assumed on every GPU"
    return reasons


def gpu_pods_left_alone(pods: Iterable[PodView], evicted: Iterable[PodView]) -> list[PodRef]:
    """Pods using GPU/MIG resources on this node that the drain does not move."""
    moved = {pod.ref for pod in evicted}
    return sorted(
        pod.ref
        for pod in pods
        if pod.gpu_resources and pod.ref not in moved and not (pod.is_daemonset_pod or pod.is_mirror)
    )
