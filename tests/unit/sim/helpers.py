"""Small helpers for driving FakeNvml the way a pynvml caller does (ctypes arrays, byref counts)."""

from __future__ import annotations

from collections.abc import Callable
from ctypes import byref, c_uint
from typing import Any

import pynvml
import pytest

from migagent.catalog import GiProfile, model_by_key
from migagent.layout.profile import gi_profile_name
from migagent.sim import FakeNvml


def started(spec: str = "A100-40GB", **options: Any) -> FakeNvml:
    """A node with MIG enabled and NVML initialised."""
    fake = FakeNvml.from_spec(spec, mig_enabled=True, **options)
    fake.nvmlInit()
    return fake


def reset_like_nvidia_smi(fake: FakeNvml, pci_bus_id: str) -> None:
    """Reset as a well-behaved caller must: release NVML, run the reset, initialise NVML again."""
    fake.nvmlShutdown()
    try:
        fake.sim_reset_gpu(pci_bus_id)
    finally:
        fake.nvmlInit()


def gi_profile(model_key: str, name: str) -> GiProfile:
    """A catalog GI profile by its mig-parted name (`3g.20gb`, `1g.5gb+me`)."""
    model = model_by_key(model_key)
    for profile in model.profiles.gi_profiles:
        if str(gi_profile_name(profile, model.profiles)) == name:
            return profile
    raise KeyError(name)


def nvml_code(call: Callable[[], object]) -> int:
    """The NVML error code `call` raises (fails the test if it raises nothing)."""
    with pytest.raises(pynvml.NVMLError) as info:
        call()
    code: int = info.value.value
    return code


def create_gi(fake: FakeNvml, device: Any, profile_id: int, start: int, size: int) -> Any:
    placement = pynvml.c_nvmlGpuInstancePlacement_t(start, size)
    return fake.nvmlDeviceCreateGpuInstanceWithPlacement(device, profile_id, byref(placement))


def gi_placement(fake: FakeNvml, gi: Any) -> tuple[int, int]:
    info = fake.nvmlGpuInstanceGetInfo(gi)
    return info.placement.start, info.placement.size


def gpu_instances(fake: FakeNvml, device: Any, profile_id: int) -> list[Any]:
    count = c_uint(0)
    array = (pynvml.c_nvmlGpuInstance_t * 8)()  # no MIG GPU holds more; NULL is no count query here
    fake.nvmlDeviceGetGpuInstances(device, profile_id, array, byref(count))
    return list(array[: count.value])


def all_gi_ids(fake: FakeNvml, device: Any, model_key: str) -> list[int]:
    ids = [
        fake.nvmlGpuInstanceGetInfo(gi).id
        for profile in model_by_key(model_key).profiles.gi_profiles
        for gi in gpu_instances(fake, device, profile.id)
    ]
    return sorted(ids)


def capacity(fake: FakeNvml, device: Any, model_key: str, name: str) -> int:
    result: int = fake.nvmlDeviceGetGpuInstanceRemainingCapacity(device, gi_profile(model_key, name).id)
    return result
