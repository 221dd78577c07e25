"""Which pods a plan disturbs: the scoping rule that lets migagent drain less than the whole node.

A pod is affected when it holds a MIG device on a GI the plan destroys, or any device on a GPU
the plan resets or switches mode. Which device a pod holds comes from the kubelet's PodResources
(MIG UUID or GPU UUID -> GPU index and GI placement via the Observation). A pod that asks for
GPU/MIG resources but whose devices cannot be determined (absent from PodResources, or an
unknown UUID) is assumed to hold every GPU. DaemonSet and mirror pods are never evicted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from migagent.catalog.model import Placement
from migagent.layout.observed import Observation
from migagent.node.names import is_gpu_resource
from migagent.node.port import PodView
from migagent.planning import Plan

_WHOLE_GPU: Placement | None = None


class PodDeviceHolding(Protocol):
    """One container's devices of one resource, as PodResources reports them (podresources.PodDevices)."""

    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def resource_name(self) -> str: ...

    @property
    def device_ids(self) -> tuple[str, ...]: ...


class PodDevicesLister(Protocol):
    """The kubelet's PodResources `List` (migagent.podresources.PodResourcesClient)."""

    def list(self) -> Sequence[PodDeviceHolding]: ...


@dataclass(frozen=True)
class Disturbance:
    """The devices a plan disturbs: whole GPUs (reset / mode change) and single GIs (destroyed)."""

    whole_gpus: frozenset[int]
    gis: frozenset[tuple[int, Placement]]

    @property
    def is_empty(self) -> bool:
        return not self.whole_gpus and not self.gis

    def touches(self, gpu: int, placement: Placement | None) -> bool:
        if gpu in self.whole_gpus:
            return True
        if placement is _WHOLE_GPU:
            return any(g == gpu for g, _ in self.gis)
        return (gpu, placement) in self.gis

    @classmethod
    def of(cls, plan: Plan) -> Disturbance:
        whole = frozenset(g.gpu for g in plan.gpus if g.reset or g.mode_change is not None)
        gis = frozenset((g.gpu, gi.placement) for g in plan.gpus for gi in g.destroy)
        return cls(whole_gpus=whole, gis=gis)


def device_locations(observation: Observation) -> dict[str, tuple[int, Placement | None]]:
    """Device id -> (GPU index, GI placement); a whole GPU's own UUID maps to placement None."""
    locations: dict[str, tuple[int, Placement | None]] = {}
    for gpu in observation.gpus:
        locations[gpu.uuid] = (gpu.index, _WHOLE_GPU)
        for gi in gpu.gpu_instances:
            for ci in gi.compute_instances:
                locations[ci.uuid] = (gpu.index, gi.placement)
    return locations


def _device_id(raw: str) -> str:
    # Shared (time-sliced / MPS) devices are reported as `<uuid>::<replica>`.
    return raw.split("::", 1)[0]


def disturbed_pods(
    plan: Plan, observation: Observation, pod_devices: Iterable[PodDeviceHolding], pods: Iterable[PodView]
) -> list[PodView]:
    """Every unfinished pod holding (or maybe holding) a device the plan disturbs, DaemonSet and
    mirror pods included: the safety gate refuses a change that would pull a device from those."""
    disturbance = Disturbance.of(plan)
    if disturbance.is_empty:
        return []
    locations = device_locations(observation)
    held = devices_by_pod(pod_devices)
    chosen = [
        pod
        for pod in pods
        if not pod.is_finished
        and _disturbed(pod, held.get((pod.ref.namespace, pod.ref.name)), locations, disturbance)
    ]
    return sorted(chosen, key=lambda pod: pod.ref)


def gi_workloads(
    observation: Observation, pod_devices: Iterable[PodDeviceHolding]
) -> dict[tuple[int, Placement], int]:
    """How many pods hold each GI, by (GPU index, placement): what destroying that GI would evict."""
    return {gi: len(pods) for gi, pods in gi_pods(observation, pod_devices).items()}


def gi_pods(
    observation: Observation, pod_devices: Iterable[PodDeviceHolding]
) -> dict[tuple[int, Placement], list[str]]:
    """The pods (`namespace/name`, sorted) holding each GI, by (GPU index, placement)."""
    locations = device_locations(observation)
    holders: dict[tuple[int, Placement], set[str]] = {}
    for (namespace, name), device_ids in devices_by_pod(pod_devices).items():
        for device_id in device_ids:
            gpu, placement = locations.get(device_id, (-1, None))
            if placement is not None:
                holders.setdefault((gpu, placement), set()).add(f"{namespace}/{name}")
    return {gi: sorted(pods) for gi, pods in holders.items()}


def devices_by_pod(pod_devices: Iterable[PodDeviceHolding]) -> dict[tuple[str, str], list[str]]:
    """The GPU devices each pod holds, by (namespace, name)."""
    held: dict[tuple[str, str], list[str]] = {}
    for entry in pod_devices:
        if is_gpu_resource(entry.resource_name):
            held.setdefault((entry.namespace, entry.name), []).extend(_device_id(d) for d in entry.device_ids)
    return held


def evictable(pod: PodView) -> bool:
    """DaemonSet and mirror pods are never evicted: their controller (the kubelet) puts them straight back."""
    return not (pod.is_daemonset_pod or pod.is_mirror)


def _disturbed(
    pod: PodView,
    device_ids: list[str] | None,
    locations: Mapping[str, tuple[int, Placement | None]],
    disturbance: Disturbance,
) -> bool:
    if not device_ids:
        # Not in PodResources: if it asks for GPUs at all, it may hold any of them.
        return bool(pod.gpu_resources)
    for device_id in device_ids:
        location = locations.get(device_id)
        if location is None or disturbance.touches(*location):
            return True
    return False
