"""What NVIDIA's device plugin would advertise for the simulated node, under each MIG strategy.

Read straight from the FakeNvml state rather than through NVML calls, so the fake kubelet never
consumes a fault a test injected for the code under test, nor shows up in `sim_mutations`.

Rules (reference landscape.md §3.1, kubernetes.md §1.5; single and none: migagent.layout.strategy).
Mixed strategy:
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
from migagent.layout.sharing import NO_SHARING, SharingConfig
from migagent.layout.strategy import (
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    GpuDevices,
    MigStrategy,
    mig_resource_name,
    strategy_problems,
)
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import MIG_ENABLE

__all__ = [
    "GPU_RESOURCE",
    "MIG_RESOURCE_PREFIX",
    "DeviceInventory",
    "PluginDevice",
    "is_plugin_resource",
    "mig_resource_name",
    "read_inventory",
]


def is_plugin_resource(name: str) -> bool:
    """Resources the NVIDIA device plugin owns on a node (any strategy; `nvidia.com/gpu.shared` too)."""
    return name == GPU_RESOURCE or name.startswith((MIG_RESOURCE_PREFIX, GPU_RESOURCE + "."))


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
    """What the plugin, run with `strategy`, announces: `devices` already carry the strategy's names."""

    devices: tuple[PluginDevice, ...]
    gpus: tuple[GpuDevices, ...] = ()
    strategy: MigStrategy = MigStrategy.MIXED

    @property
    def plugin_error(self) -> str | None:
        """Why the real plugin would exit on this layout, or None when it starts."""
        problems = strategy_problems(self.strategy, self.gpus)
        if not problems:
            return None
        if self.strategy is MigStrategy.MIXED:
            profile = next(d.profile for d in self.devices if d.profile is not None and not d.profile.is_full_gi)
            device = next(d for d in self.devices if d.profile == profile)
            # The plugin's own words (internal/rm/device_map.go), then ours.
            return (
                f"MIG profile '{profile}' (device {device.uuid} on GPU {device.gpu_index}) does not match any"
                f" resource patterns: the device plugin's mixed strategy only exposes compute instances that fill"
                f" their GPU instance"
            )
        return f"invalid MIG configuration for the {self.strategy} strategy: {'; '.join(problems)}"

    def resources(self, sharing: SharingConfig = NO_SHARING) -> dict[str, tuple[str, ...]]:
        """Resource name -> device ids the plugin registers (empty when the plugin would exit).

        Under a sharing config a replicated resource's devices are registered `replicas` times as
        `<uuid>::<n>` (internal/rm/devices.go NewAnnotatedID), under its new name when renamed. A
        `devices` subset is modelled as its first device only (the agent does not predict subsets)."""
        if self.plugin_error is not None:
            return {}
        grouped: dict[str, list[str]] = {}
        for device in self.devices:
            grouped.setdefault(device.resource_name, []).append(device.uuid)
        registered: dict[str, list[str]] = {}
        for name, ids in grouped.items():
            advertised = sharing.advertised(name)
            if advertised.replicas <= 1:
                registered.setdefault(advertised.name, []).extend(ids)
                continue
            replicated = ids if advertised.exact else ids[:1]
            for uuid in ids:
                copies = advertised.replicas if uuid in replicated else 1
                registered.setdefault(advertised.name, []).extend(
                    f"{uuid}::{n}" if uuid in replicated else uuid for n in range(copies)
                )
        return {name: tuple(ids) for name, ids in sorted(registered.items())}

    def counts(self, sharing: SharingConfig = NO_SHARING) -> dict[str, int]:
        return {name: len(ids) for name, ids in self.resources(sharing).items()}

    def by_uuid(self, uuid: str) -> PluginDevice | None:
        return next((d for d in self.devices if d.uuid == uuid), None)


def read_inventory(fake: FakeNvml, strategy: MigStrategy = MigStrategy.MIXED) -> DeviceInventory:
    mig_devices = list(_mig_devices(fake))
    gpus = tuple(
        GpuDevices(
            index,
            gpu.mig_current == MIG_ENABLE,
            tuple(d.profile for d in mig_devices if d.gpu_index == index and d.profile is not None),
        )
        for index, gpu in enumerate(list(fake.state.gpus))
    )
    return DeviceInventory(tuple(_announced(fake, mig_devices, strategy)), gpus, strategy)


def _announced(fake: FakeNvml, mig_devices: list[PluginDevice], strategy: MigStrategy) -> Iterator[PluginDevice]:
    for index, gpu in enumerate(list(fake.state.gpus)):
        if strategy is MigStrategy.NONE or gpu.mig_current != MIG_ENABLE:
            yield PluginDevice(gpu.uuid, index, GPU_RESOURCE)
            continue
        for device in (d for d in mig_devices if d.gpu_index == index):
            if strategy is MigStrategy.SINGLE:
                yield PluginDevice(device.uuid, index, GPU_RESOURCE, device.profile)
            else:
                yield device


def _mig_devices(fake: FakeNvml) -> Iterator[PluginDevice]:
    """Every MIG device (compute instance) with its mixed-strategy resource name."""
    for index, gpu in enumerate(list(fake.state.gpus)):
        if gpu.mig_current != MIG_ENABLE:
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
