"""What NVIDIA's device plugin (mixed MIG strategy) would advertise for the simulated node.

Read straight from the FakeNvml state rather than through NVML calls, so the fake kubelet never
consumes a fault a test injected for the code under test, nor shows up in `sim_mutations`.

Rules (reference landscape.md §3.1, kubernetes.md §1.5):
- a MIG-enabled GPU offers one device per compute instance; resource `nvidia.com/mig-<profile>`
  with `+` written as `.` (`1g.10gb+me` -> `nvidia.com/mig-1g.10gb.me`); device id = the MIG UUID;
- a GPU with MIG disabled stays `nvidia.com/gpu` (id = GPU UUID); a MIG-enabled GPU without
  MIG devices offers nothing;
- a compute instance smaller than its GI (C < G, e.g. `1c.2g.20gb`) matches no resource pattern:
  the plugin exits, so nothing at all is advertised while such a device exists.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from migagent.layout.profile import MigProfile, ci_profile_name
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import MIG_ENABLE

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
GPU_RESOURCE = "nvidia.com/gpu"


def is_plugin_resource(name: str) -> bool:
    """Resources the NVIDIA device plugin owns on a node (mixed strategy)."""
    return name == GPU_RESOURCE or name.startswith(MIG_RESOURCE_PREFIX)


def mig_resource_name(profile: MigProfile | str) -> str:
    """`1g.10gb+me` -> `nvidia.com/mig-1g.10gb.me`; a resource name is passed through unchanged."""
    text = str(profile)
    if text.startswith(MIG_RESOURCE_PREFIX):
        return text
    return MIG_RESOURCE_PREFIX + text.replace("+", ".")


@dataclass(frozen=True)
class PluginDevice:
    """One device as the plugin announces it to the kubelet."""

    uuid: str
    gpu_index: int
    resource_name: str
    # The MIG profile (`3g.40gb`, `1c.3g.40gb`); None for a whole GPU.
    profile: MigProfile | None = None


@dataclass(frozen=True)
class DeviceInventory:
    devices: tuple[PluginDevice, ...]

    @property
    def plugin_error(self) -> str | None:
        """Why the real plugin would exit on this layout, or None when it starts."""
        for device in self.devices:
            if device.profile is not None and not device.profile.is_full_gi:
                return (
                    f"MIG profile '{device.profile}' (device {device.uuid} on GPU {device.gpu_index}) does not "
                    "match any resource patterns: the device plugin's mixed strategy only exposes compute "
                    "instances that fill their GPU instance"
                )
        return None

    def resources(self) -> dict[str, tuple[str, ...]]:
        """Resource name -> device ids the plugin registers (empty when the plugin would exit)."""
        if self.plugin_error is not None:
            return {}
        grouped: dict[str, list[str]] = {}
        for device in self.devices:
            grouped.setdefault(device.resource_name, []).append(device.uuid)
        return {name: tuple(ids) for name, ids in sorted(grouped.items())}

    def counts(self) -> dict[str, int]:
        return {name: len(ids) for name, ids in self.resources().items()}

    def by_uuid(self, uuid: str) -> PluginDevice | None:
        return next((d for d in self.devices if d.uuid == uuid), None)


def read_inventory(fake: FakeNvml) -> DeviceInventory:
    return DeviceInventory(tuple(_devices(fake)))


def _devices(fake: FakeNvml) -> Iterator[PluginDevice]:
    for index, gpu in enumerate(list(fake.state.gpus)):
        if gpu.mig_current != MIG_ENABLE:
            yield PluginDevice(gpu.uuid, index, GPU_RESOURCE)
            continue
        table = fake.model(index).profiles
        pairs = [(gi, ci) for gi in list(gpu.gpu_instances) for ci in list(gi.compute_instances)]
        for gi, ci in sorted(pairs, key=lambda pair: (pair[0].id, pair[1].id)):
            gi_profile = table.gi_profile(gi.profile_id)
            ci_profile = gi_profile.ci_profile(ci.profile_id) if gi_profile is not None else None
            if gi_profile is None or ci_profile is None:
                continue  # only a hand-edited state can name a profile the model lacks
            profile = ci_profile_name(gi_profile, ci_profile, table)
            yield PluginDevice(ci.uuid, index, mig_resource_name(profile), profile)
