"""Which device a workload the fake kubelet runs lands on, and under which resource a plugin serves it."""

from __future__ import annotations

from migagent.layout.strategy import MigStrategy
from migagent.sim.fake_nvml import FakeNvml
from migagent_sim.deviceplugin import DeviceManager
from migagent_sim.kubelet_devices import PluginDevice, mig_resource_name, read_inventory


def choose_device(
    fake: FakeNvml, strategy: MigStrategy, node: str, mig_uuid: str | None, profile: str | None, *, held: set[str]
) -> PluginDevice:
    """The device `mig_uuid` names, else the first free one of `profile` (e.g. `1g.10gb`, `1g.10gb+me` or
    `nvidia.com/mig-1g.10gb.me`), or of any profile when both are None; ValueError naming what is free.
    `held`: devices workloads hold already (devices NVML shows processes on are held too)."""
    inventory = read_inventory(fake, strategy)
    wanted = mig_resource_name(profile) if profile is not None else None
    if mig_uuid is not None:
        device = inventory.by_uuid(mig_uuid)
        if device is None:
            known = ", ".join(d.uuid for d in inventory.devices) or "none"
            raise ValueError(f"mig_uuid {mig_uuid!r} is not a device of node {node}; devices: {known}")
        if wanted is not None and _mixed_name(device) != wanted:
            raise ValueError(f"mig_uuid {mig_uuid} is a {_mixed_name(device)} device, not {wanted}")
        return device
    held = held | _uuids_with_processes(fake)
    candidates = [
        d
        for d in inventory.devices
        if d.profile is not None and (wanted is None or _mixed_name(d) == wanted) and d.uuid not in held
    ]
    if not candidates:
        free = sorted({_mixed_name(d) for d in inventory.devices if d.profile is not None and d.uuid not in held})
        raise ValueError(
            f"no free MIG device{' of profile ' + str(profile) if profile else ''} on node {node}; "
            f"free: {', '.join(free) or 'none'}"
        )
    return candidates[0]


def served_as(manager: DeviceManager, device: PluginDevice) -> tuple[str, list[str]]:
    """The resource a registered plugin serves `device` as, and its free ids there (a shared device's
    replicas `<uuid>::<n>`); without a plugin serving it, its strategy's name and none."""
    held = {d for e in manager.pod_devices() for d in e.device_ids}
    for resource, ids in manager.healthy_devices().items():
        mine = [d for d in ids if d == device.uuid or d.startswith(device.uuid + "::")]
        if mine:
            return resource, [d for d in mine if d not in held]
    return device.resource_name, []


def _uuids_with_processes(fake: FakeNvml) -> set[str]:
    return {
        ci.uuid for gpu in fake.state.gpus for gi in gpu.gpu_instances for ci in gi.compute_instances if ci.processes
    }


def _mixed_name(device: PluginDevice) -> str:
    """The device's profile as a mixed-strategy resource name (how tests ask for a device, any strategy)."""
    return mig_resource_name(device.profile) if device.profile is not None else device.resource_name
