"""Read the GPU instances, compute instances and MIG devices of one MIG-enabled GPU.

Placements always come from `nvmlGpuInstanceGetInfo().placement`, never from the GI id: the id is
a chip-dependent function of the placement (docs/nvml.md §7, standard vs xor4 maps).
MIG UUIDs and processes come from walking the MIG device handles, not from
`nvmlComputeInstanceGetInfo().device`, which is the parent GPU (docs/nvml.md §3).
"""

from __future__ import annotations

from ctypes import byref, c_uint
from dataclasses import dataclass
from functools import partial

import pynvml

from migagent.catalog import Placement, ProfileTable, model_by_pci_device_id
from migagent.errors import NotSupportedError, PermanentError
from migagent.layout.observed import ObservedCi, ObservedGi, ObservedProcess
from migagent.nvml.device import Device
from migagent.nvml.enumerate import CI_ENUM_COUNT, profiles_by_enum
from migagent.nvml.errors import LIBRARY_MISMATCH, classify, nvml_call, nvml_probe
from migagent.nvml.lib import Handle, NvmlLib

# pynvml's default (the driver's `_v3` entry point), then the older `_v2` one.
_PROCESS_CALLS = ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2")
# No MIG GPU has more than 8 memory slices, so none holds more instances of one profile.
_SLICES_AT_MOST = 8
_NO_MIG_DEVICE = frozenset({pynvml.NVML_ERROR_NOT_FOUND, pynvml.NVML_ERROR_INVALID_ARGUMENT})


@dataclass(frozen=True)
class MigDevice:
    """What a MIG device handle tells about one compute instance."""

    uuid: str
    processes: tuple[ObservedProcess, ...]


CiProfileCounts = dict[int, tuple[tuple[int, int], ...]]
"""GI profile id -> (CI profile id, instanceCount) as NVML answered for a GI of that profile."""


def read_gpu_instances(
    lib: NvmlLib, device: Device, table: ProfileTable, ci_profiles: CiProfileCounts | None = None
) -> tuple[ObservedGi, ...]:
    """`ci_profiles`: the CI profile answers already read for GIs of a profile (filled in as read);
    they are fixed for the lifetime of a MIG mode, as the GI profile table is."""
    mig_devices = read_mig_devices(lib, device)
    known = {} if ci_profiles is None else ci_profiles
    gis = [
        _observe_gi(lib, device, gi_handle, mig_devices, known)
        for profile in table.gi_profiles
        for gi_handle in _gpu_instances_of(lib, device, profile.id, capacity=profile.max_instances)
    ]
    return tuple(sorted(gis, key=lambda gi: gi.placement))


def read_mig_devices(lib: NvmlLib, device: Device) -> dict[tuple[int, int], MigDevice]:
    """(GI id, CI id) -> MIG device, for every MIG device handle of the GPU."""
    with nvml_call("nvmlDeviceGetMaxMigDeviceCount", device.label):
        max_count = lib.nvmlDeviceGetMaxMigDeviceCount(device.handle)
    found: dict[tuple[int, int], MigDevice] = {}
    for index in range(max_count):
        handle = nvml_probe(
            partial(lib.nvmlDeviceGetMigDeviceHandleByIndex, device.handle, index),
            absent=_NO_MIG_DEVICE,
            what=f"nvmlDeviceGetMigDeviceHandleByIndex({index})",
            gpu_label=device.label,
        )
        if handle is not None:
            key, mig_device = _read_mig_device(lib, device, handle, index)
            found[key] = mig_device
    return found


def read_processes(lib: NvmlLib, handle: Handle, *, what: str, gpu_label: str) -> tuple[ObservedProcess, ...]:
    """The compute processes NVML reports for `handle` (a whole GPU, or one MIG device).

    pynvml's default call is the `_v3` entry point; on a driver too old to export it the real pynvml
    raises NVMLLibraryMismatchError (its `throwOnVersionMismatch`, not an NVMLError; older releases
    raise FUNCTION_NOT_FOUND), and the `_v2` call (same fields) is asked instead of failing.
    """
    for name in _PROCESS_CALLS:
        call = getattr(lib, name, None)
        if call is None:
            continue
        last = name == _PROCESS_CALLS[-1]
        try:
            found = call(handle)
        except LIBRARY_MISMATCH as exc:
            if not last:
                continue
            raise NotSupportedError(f"{gpu_label}: {name} ({what}): this driver lacks the call") from exc
        except pynvml.NVMLError as exc:
            if int(exc.value) == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND and not last:
                continue
            raise classify(exc, what=f"{name} ({what})", gpu_label=gpu_label) from exc
        # usedGpuMemory is None where NVML cannot tell (NVML_VALUE_NOT_AVAILABLE): counted as 0 bytes.
        return tuple(ObservedProcess(pid=int(p.pid), used_memory_bytes=int(p.usedGpuMemory or 0)) for p in found)
    raise PermanentError(f"{gpu_label}: this pynvml offers no nvmlDeviceGetComputeRunningProcesses call ({what})")


def _read_mig_device(lib: NvmlLib, device: Device, handle: Handle, index: int) -> tuple[tuple[int, int], MigDevice]:
    with nvml_call(f"reading MIG device {index} (GI/CI id, UUID, processes)", device.label):
        gi_id = int(lib.nvmlDeviceGetGpuInstanceId(handle))
        ci_id = int(lib.nvmlDeviceGetComputeInstanceId(handle))
        uuid = str(lib.nvmlDeviceGetUUID(handle))
    processes = read_processes(lib, handle, what=f"MIG device {index}", gpu_label=device.label)
    return (gi_id, ci_id), MigDevice(uuid=uuid, processes=processes)


def handle_capacity(device: Device, nvml_count: int) -> int:
    """Room for the larger of NVML's instance count and the catalog's most MIG devices on this model.

    NVML writes as many handles as exist into the caller's array; a count NVML under-reports (mig-parted
    hard-codes A30's for that reason) must not let it write past a ctypes array sized by that count."""
    model = model_by_pci_device_id(device.pci_device_id)
    return max(nvml_count, model.max_mig_devices if model is not None else _SLICES_AT_MOST)


def _gpu_instances_of(lib: NvmlLib, device: Device, profile_id: int, *, capacity: int) -> list[Handle]:
    capacity = handle_capacity(device, capacity)
    buffer = (pynvml.c_nvmlGpuInstance_t * capacity)()
    count = c_uint(capacity)
    with nvml_call(f"nvmlDeviceGetGpuInstances(profile {profile_id})", device.label):
        lib.nvmlDeviceGetGpuInstances(device.handle, profile_id, buffer, byref(count))
    return [buffer[i] for i in range(count.value)]


def _observe_gi(
    lib: NvmlLib,
    device: Device,
    gi_handle: Handle,
    mig_devices: dict[tuple[int, int], MigDevice],
    ci_profiles: CiProfileCounts,
) -> ObservedGi:
    with nvml_call("nvmlGpuInstanceGetInfo", device.label):
        info = lib.nvmlGpuInstanceGetInfo(gi_handle)
    gi_id = int(info.id)
    profile_id = int(info.profileId)
    if profile_id not in ci_profiles:
        ci_profiles[profile_id] = _ci_profile_counts(lib, device, gi_handle, gi_id=gi_id)
    cis = [
        _observe_ci(lib, device, ci_handle, gi_id=gi_id, mig_devices=mig_devices)
        for ci_handle in _compute_instances_of(lib, device, gi_handle, gi_id=gi_id, counts=ci_profiles[profile_id])
    ]
    return ObservedGi(
        id=gi_id,
        profile_id=int(info.profileId),
        placement=Placement(int(info.placement.start), int(info.placement.size)),
        compute_instances=tuple(sorted(cis, key=lambda ci: ci.id)),
    )


def _ci_profile_counts(lib: NvmlLib, device: Device, gi_handle: Handle, *, gi_id: int) -> tuple[tuple[int, int], ...]:
    """(CI profile id, instanceCount) for each distinct CI profile NVML offers in this GI."""
    counts: dict[int, int] = {}
    answers = profiles_by_enum(
        lambda enum: lib.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            gi_handle, enum, pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
        ),
        what=f"nvmlGpuInstanceGetComputeInstanceProfileInfo(GI {gi_id})",
        gpu_label=device.label,
        count=CI_ENUM_COUNT,
    )
    for _enum, info in answers:
        # Even a profile NVML counts 0 instances of is read: handle_capacity sizes by the catalog too.
        if int(info.id) not in counts:
            counts[int(info.id)] = int(info.instanceCount)
    return tuple(counts.items())


def compute_instances_of(lib: NvmlLib, device: Device, gi_handle: Handle, *, gi_id: int) -> list[Handle]:
    """Every CI of this GI, its CI profiles read afresh (callers outside an observation)."""
    counts = _ci_profile_counts(lib, device, gi_handle, gi_id=gi_id)
    return _compute_instances_of(lib, device, gi_handle, gi_id=gi_id, counts=counts)


def _compute_instances_of(
    lib: NvmlLib, device: Device, gi_handle: Handle, *, gi_id: int, counts: tuple[tuple[int, int], ...]
) -> list[Handle]:
    handles: list[Handle] = []
    for profile_id, nvml_count in counts:
        capacity = handle_capacity(device, nvml_count)
        buffer = (pynvml.c_nvmlComputeInstance_t * capacity)()
        count = c_uint(capacity)
        with nvml_call(f"nvmlGpuInstanceGetComputeInstances(GI {gi_id}, profile {profile_id})", device.label):
            lib.nvmlGpuInstanceGetComputeInstances(gi_handle, profile_id, buffer, byref(count))
        handles.extend(buffer[i] for i in range(count.value))
    return handles


def _observe_ci(
    lib: NvmlLib,
    device: Device,
    ci_handle: Handle,
    *,
    gi_id: int,
    mig_devices: dict[tuple[int, int], MigDevice],
) -> ObservedCi:
    with nvml_call(f"nvmlComputeInstanceGetInfo(GI {gi_id})", device.label):
        info = lib.nvmlComputeInstanceGetInfo(ci_handle)
    ci_id = int(info.id)
    # A CI always has a MIG device; if NVML has not listed it yet the UUID stays empty rather than wrong.
    mig_device = mig_devices.get((gi_id, ci_id), MigDevice(uuid="", processes=()))
    return ObservedCi(
        id=ci_id,
        profile_id=int(info.profileId),
        placement=Placement(int(info.placement.start), int(info.placement.size)),
        uuid=mig_device.uuid,
        processes=mig_device.processes,
    )
