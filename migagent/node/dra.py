"""NVIDIA's DRA driver on the node: its ResourceSlices must show the MIG devices the GPUs now hold.

The driver's GPU kubelet plugin (k8s-dra-driver-gpu, driver name `gpu.nvidia.com`) announces
pre-created ("static") MIG devices in ResourceSlices for its node, one device per MIG device, named
`gpu-<minor>-mig-<giProfileId>-<start>-<size>` with attributes `type=mig`, `uuid` (the MIG UUID),
`parentUUID` and `profile` (cmd/gpu-kubelet-plugin/deviceinfo.go). Like the device plugin, it
enumerates at start only: after a change its pod is deleted for its DaemonSet to recreate (wiring:
`DeletePod` on its selector) and success waits until the slices list exactly the MIG UUIDs NVML
reports. DynamicMIG (devices created per claim) is another engineer's refusal; not handled here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from migagent.layout.observed import Observation

DRA_DRIVER = "gpu.nvidia.com"
DRA_NAMESPACE = "nvidia-dra-driver-gpu"
DRA_PLUGIN_SELECTOR = "nvidia-dra-driver-gpu-component=kubelet-plugin"
"""The chart's kubelet-plugin pod label (templates/_helpers.tpl selectorLabels with componentName)."""
MIG_DEVICE_TYPE = "mig"

Probe = Callable[[], str | None]
"""Another consumer that must show the new devices (the DRA driver's ResourceSlices): None once it
does, else what is missing."""


@dataclass(frozen=True)
class SliceDevice:
    """One device of a ResourceSlice: its name and its string attributes (`type`, `uuid`, `profile`...)."""

    name: str
    attributes: Mapping[str, str] = field(default_factory=dict, hash=False)


class SliceReader(Protocol):
    def list_slice_devices(self, *, node_name: str, driver: str) -> list[SliceDevice]: ...


def mig_uuids(observation: Observation) -> set[str]:
    return {
        ci.uuid
        for gpu in observation.gpus
        if gpu.mig_current
        for gi in gpu.gpu_instances
        for ci in gi.compute_instances
    }


class DraSlices:
    """A probe per observation: None once the node's slices list exactly its MIG devices."""

    def __init__(self, reader: SliceReader, *, node_name: str, driver: str = DRA_DRIVER) -> None:
        self._reader = reader
        self._node = node_name
        self._driver = driver

    def probe(self, observation: Observation) -> Probe:
        wanted = mig_uuids(observation)

        def missing() -> str | None:
            devices = self._reader.list_slice_devices(node_name=self._node, driver=self._driver)
            have = {d.attributes.get("uuid", "") for d in devices if d.attributes.get("type") == MIG_DEVICE_TYPE}
            absent, stale = sorted(wanted - have), sorted(have - wanted)
            if not absent and not stale:
                return None
            return (
                f"ResourceSlices of {self._driver} on {self._node} list {len(have)} MIG device(s), the GPUs hold"
                f" {len(wanted)}: {len(absent)} missing{' (' + absent[0] + ', ...)' if absent else ''},"
                f" {len(stale)} stale{' (' + stale[0] + ', ...)' if stale else ''}"
            )

        return missing
