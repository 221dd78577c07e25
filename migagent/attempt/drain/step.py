"""The DRAIN phase: the drain scoped again once the node is cordoned (a pod scheduled since the gate
ran is seen, and gated), then only the pods on devices the plan disturbs evicted, each with an Event
saying which device it held and what the plan does to it (and, by omission, why the others stayed)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

import structlog

from migagent.attempt.drain.gate import decide_drain
from migagent.attempt.drain.scope import PodDeviceHolding, devices_by_pod
from migagent.attempt.ports import AgentPorts, AgentSettings
from migagent.attempt.report.status import StatusReporter
from migagent.catalog.model import Placement
from migagent.layout.observed import Observation, ObservedGpu
from migagent.layout.profile import gi_profile_name
from migagent.node.names import ConditionReason, EventReason
from migagent.node.port import PodRef, PodView
from migagent.planning import Plan

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
    devices = devices_by_pod(holdings)
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
