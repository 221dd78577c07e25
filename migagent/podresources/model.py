"""`PodDevices`, the one value both sides of the PodResources API speak (its wire mapping: `wire`)."""

from __future__ import annotations

from dataclasses import dataclass

# Time-slicing/MPS replicas of one device are announced as `<uuid>::<replica>` (reference §1.5).
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
