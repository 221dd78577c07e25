"""What NVIDIA's device plugin would advertise for the simulated node, under each MIG strategy.

Read straight from the FakeNvml state rather than through NVML calls, so the fake kubelet never
consumes a fault a test injected for the code under test, nor shows up in `sim_mutations`.

Rules: migagent.layout.strategy (checked against NVIDIA's plugin v0.18.2 in tests/nvidia).
Mixed strategy:
- a MIG-enabled GPU offers one device per compute instance, named by the first of the GPU's full
  profiles found in its profile name (`1g.10gb+me` -> `nvidia.com/mig-1g.10gb`, `1c.2g.20gb` ->
  `nvidia.com/mig-2g.20gb`); device id = the MIG UUID;
- a GPU with MIG disabled stays `nvidia.com/gpu` (id = GPU UUID); a MIG-enabled GPU without
  MIG devices offers nothing;
- a device no pattern matches makes the plugin exit, so nothing at all is advertised.
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
    mixed_resource_name,
    resource_patterns,
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
    "mps_refusal",
    "read_inventory",
]


_NO_PATTERN = ""
"""The resource of a MIG device no mixed-strategy pattern matches (the plugin exits on it)."""


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
            device = next(d for d in self.devices if d.resource_name == _NO_PATTERN)
            # The plugin's own words (internal/rm/device_map.go).
            return f"MIG profile '{device.profile}' (device {device.uuid}) does not match any resource patterns"
        return f"invalid MIG configuration for the {self.strategy} strategy: {'; '.join(problems)}"

    def resources(self, sharing: SharingConfig = NO_SHARING) -> dict[str, tuple[str, ...]]:
        """Resource name -> device ids the plugin registers (empty when the plugin would exit).

        Under a sharing config every device of a replicated resource is registered `replicas` times
        as `<uuid>::<n>` (internal/rm/device_map.go updateDeviceMapWithReplicas, devices.go
        NewAnnotatedID), under `<name>.shared` with renameByDefault."""
        if self.plugin_error is not None:
            return {}
        registered: dict[str, list[str]] = {}
        for device in self.devices:
            advertised = sharing.advertised(device.resource_name)
            ids = registered.setdefault(advertised.name, [])
            if advertised.replicas <= 1:
                ids.append(device.uuid)
            else:
                ids.extend(f"{device.uuid}::{n}" for n in range(advertised.replicas))
        return {name: tuple(ids) for name, ids in sorted(registered.items())}

    def by_uuid(self, uuid: str) -> PluginDevice | None:
        return next((d for d in self.devices if d.uuid == uuid), None)


def mps_refusal(sharing: SharingConfig, strategy: MigStrategy, inventory: DeviceInventory) -> str | None:
    """Why the plugin refuses to start with an MPS sharing config here (main.go validateFlags,
    internal/plugin/mps.go), or None."""
    if sharing.kind != "mps":
        return None
    if strategy is MigStrategy.MIXED:
        return "unable to validate flags: using --mig-strategy=mixed is not supported with MPS"
    if any(d.profile is not None and sharing.advertised(d.resource_name).replicas > 1 for d in inventory.devices):
        return "sharing using MPS is not supported for MIG devices"
    return None


def read_inventory(fake: FakeNvml, strategy: MigStrategy = MigStrategy.MIXED) -> DeviceInventory:
    mig_devices = list(_mig_devices(fake))
    gpus = tuple(
        GpuDevices(
            f"GPU {index}",
            gpu.mig_current == MIG_ENABLE,
            tuple(d.profile for d in mig_devices if d.gpu_index == index and d.profile is not None),
            resource_patterns(fake.model(index).profiles),
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
    """Every MIG device (compute instance) with its mixed-strategy resource name (_NO_PATTERN: none)."""
    for index, gpu in enumerate(list(fake.state.gpus)):
        if gpu.mig_current != MIG_ENABLE:
            continue
        table = fake.model(index).profiles
        patterns = resource_patterns(table)
        pairs = [(gi, ci) for gi in list(gpu.gpu_instances) for ci in list(gi.compute_instances)]
        for gi, ci in sorted(pairs, key=lambda pair: (pair[0].id, pair[1].id)):
            gi_profile = table.gi_profile(gi.profile_id)
            ci_profile = gi_profile.ci_profile(ci.profile_id) if gi_profile is not None else None
            if gi_profile is None or ci_profile is None:
                continue  # only a hand-edited state can name a profile the model lacks
            profile = ci_profile_name(gi_profile, ci_profile, table)
            yield PluginDevice(ci.uuid, index, mixed_resource_name(profile, patterns) or _NO_PATTERN, profile)
