"""`PodDevices`, the one value both sides of the PodResources API speak, and its wire mapping."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from migagent.podresources.generated import api_pb2

# Time-slicing/MPS replicas of one device are announced as `<uuid>::<replica>` (docs/device-plugin.md §4).
_REPLICA_SEPARATOR = "::"


@dataclass(frozen=True)
class PodDevices:
    """The device ids of one extended resource held by one container of one pod."""

    namespace: str
    name: str
    container: str
    resource_name: str
    device_ids: tuple[str, ...]


def physical_device_id(device_id: str) -> str:
    """`MIG-abc::3` -> `MIG-abc`: a shared replica is still the same physical device."""
    return device_id.split(_REPLICA_SEPARATOR, 1)[0]


def from_pod_resources(pods: Iterable[api_pb2.PodResources]) -> tuple[PodDevices, ...]:
    """Flatten the kubelet's pod -> container -> resource tree; containers without devices vanish."""
    flat: list[PodDevices] = []
    for pod in pods:
        for container in pod.containers:
            for devices in container.devices:
                ids = tuple(dict.fromkeys(physical_device_id(d) for d in devices.device_ids))
                flat.append(PodDevices(pod.namespace, pod.name, container.name, devices.resource_name, ids))
    return tuple(flat)


def to_pod_resources(entries: Sequence[PodDevices]) -> list[api_pb2.PodResources]:
    """Group flat entries back into one message per pod and one container entry per container name."""
    pods: dict[tuple[str, str], dict[str, list[api_pb2.ContainerDevices]]] = {}
    for entry in entries:
        containers = pods.setdefault((entry.namespace, entry.name), {})
        containers.setdefault(entry.container, []).append(
            api_pb2.ContainerDevices(resource_name=entry.resource_name, device_ids=list(entry.device_ids))
        )
    return [
        api_pb2.PodResources(
            namespace=namespace,
            name=name,
            containers=[api_pb2.ContainerResources(name=c, devices=devs) for c, devs in containers.items()],
        )
        for (namespace, name), containers in pods.items()
    ]
