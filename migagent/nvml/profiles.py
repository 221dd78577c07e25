"""Build a GPU's `ProfileTable` from NVML, falling back to the catalog where NVML cannot answer.

GI profiles come from NVML: `nvmlDeviceGetGpuInstanceProfileInfo` over the query enums until
INVALID_ARGUMENT (docs/nvml.md §2: the enum is not the profile id) plus `nvmlDeviceGetGpuInstancePossiblePlacements`. CI
profiles need a GI handle to query, so they come from the catalog model with the same PCI device
id, or from the inferred rule in `ci_profiles` for unknown GPUs, until a GI of the profile exists:
`GpuDriver` then reads NVML's CI profiles through it (and NVML's default CI) and uses those, so the
catalog serves offline planning only. Drivers such as R535 refuse
profile queries while MIG is disabled (docs/nvml.md §11); the catalog's table stands in then.
"""

from __future__ import annotations

from ctypes import byref, c_uint
from functools import partial

import pynvml

from migagent.catalog import (
    CiProfile,
    Engines,
    GiProfile,
    GpuModel,
    Placement,
    ProfileTable,
    model_by_pci_device_id_and_memory,
)
from migagent.nvml.ci_profiles import PLAIN_GI_ENUMS, inferred_ci_profiles
from migagent.nvml.device import Device
from migagent.nvml.enumerate import profiles_by_enum
from migagent.nvml.errors import nvml_call, nvml_probe
from migagent.nvml.lib import GpuInstanceProfileInfo, NvmlLib

_MEMORY_UNREADABLE = frozenset({pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_NO_PERMISSION})
_MIB = 1024 * 1024


def read_profile_table(lib: NvmlLib, device: Device, *, mig_enabled: bool) -> ProfileTable | None:
    """The GPU's profile table, or None when neither NVML nor the catalog can tell."""
    infos = read_gi_profile_infos(lib, device)
    model = model_by_pci_device_id_and_memory(device.pci_device_id, _reported_memory_mb(lib, device))
    if not infos:
        # Profile queries refused while MIG is disabled: the catalog knows this model's table.
        return model.profiles if (model is not None and not mig_enabled) else None
    plain_sms = {info.sliceCount: info.multiprocessorCount for enum, info in infos if enum in PLAIN_GI_ENUMS}
    gi_profiles = tuple(
        sorted(
            (_gi_profile(lib, device, enum, info, model=model, plain_sms=plain_sms) for enum, info in infos),
            key=lambda gi: (gi.memory_mb, gi.slices, gi.enum_value),
        )
    )
    placements = [p for gi in gi_profiles for p in gi.placements]
    return ProfileTable(
        total_memory_mb=_total_memory_mb(lib, device, model=model, gi_profiles=gi_profiles),
        memory_slices=max((p.end for p in placements), default=0),
        compute_slices=max(gi.slices for gi in gi_profiles),
        gi_profiles=gi_profiles,
    )


def read_gi_profile_infos(lib: NvmlLib, device: Device) -> list[tuple[int, GpuInstanceProfileInfo]]:
    """(query enum, profile info) for every GI profile the GPU reports (see nvml.enumerate)."""
    found: list[tuple[int, GpuInstanceProfileInfo]] = []
    seen_ids: set[int] = set()
    answers = profiles_by_enum(
        partial(lib.nvmlDeviceGetGpuInstanceProfileInfo, device.handle),
        what="nvmlDeviceGetGpuInstanceProfileInfo",
        gpu_label=device.label,
    )
    for enum, info in answers:
        if int(info.id) not in seen_ids:
            seen_ids.add(int(info.id))
            found.append((enum, info))
    return found


def read_gi_placements(lib: NvmlLib, device: Device, profile_id: int) -> tuple[Placement, ...]:
    """Every legal placement of a GI profile, occupied or not (NVML answers regardless of MIG mode)."""
    what = f"nvmlDeviceGetGpuInstancePossiblePlacements(profile {profile_id})"
    count = c_uint(0)
    with nvml_call(what, device.label):
        lib.nvmlDeviceGetGpuInstancePossiblePlacements(device.handle, profile_id, None, byref(count))
    if count.value == 0:
        return ()
    buffer = (pynvml.c_nvmlGpuInstancePlacement_t * count.value)()
    with nvml_call(what, device.label):
        lib.nvmlDeviceGetGpuInstancePossiblePlacements(device.handle, profile_id, buffer, byref(count))
    return tuple(sorted(Placement(int(buffer[i].start), int(buffer[i].size)) for i in range(count.value)))


def _gi_profile(
    lib: NvmlLib,
    device: Device,
    enum: int,
    info: GpuInstanceProfileInfo,
    *,
    model: GpuModel | None,
    plain_sms: dict[int, int],
) -> GiProfile:
    profile_id = int(info.id)
    catalog_row = model.profiles.gi_profile(profile_id) if model is not None else None
    ci_profiles = (
        catalog_row.ci_profiles
        if catalog_row is not None
        else inferred_ci_profiles(
            gi_slices=int(info.sliceCount), gi_sms=int(info.multiprocessorCount), plain_sms_by_slices=plain_sms
        )
    )
    return gi_profile_from_info(lib, device, enum, info, ci_profiles)


def gi_profile_from_info(
    lib: NvmlLib, device: Device, enum: int, info: GpuInstanceProfileInfo, ci_profiles: tuple[CiProfile, ...]
) -> GiProfile:
    """A GI profile as NVML describes it (placements read from the device), with the CI profiles given."""
    return GiProfile(
        id=int(info.id),
        enum_value=enum,
        slices=int(info.sliceCount),
        memory_mb=int(info.memorySizeMB),
        sms=int(info.multiprocessorCount),
        engines=Engines(
            copy=int(info.copyEngineCount),
            decoders=int(info.decoderCount),
            encoders=int(info.encoderCount),
            jpeg=int(info.jpegCount),
            ofa=int(info.ofaCount),
        ),
        max_instances=int(info.instanceCount),
        placements=read_gi_placements(lib, device, int(info.id)),
        ci_profiles=ci_profiles,
    )


def _reported_memory_mb(lib: NvmlLib, device: Device) -> int | None:
    memory = nvml_probe(
        lambda: lib.nvmlDeviceGetMemoryInfo(device.handle),
        absent=_MEMORY_UNREADABLE,
        what="nvmlDeviceGetMemoryInfo",
        gpu_label=device.label,
    )
    return None if memory is None else int(memory.total) // _MIB


def _total_memory_mb(
    lib: NvmlLib, device: Device, *, model: GpuModel | None, gi_profiles: tuple[GiProfile, ...]
) -> int:
    memory = nvml_probe(
        lambda: lib.nvmlDeviceGetMemoryInfo(device.handle),
        absent=_MEMORY_UNREADABLE,
        what="nvmlDeviceGetMemoryInfo",
        gpu_label=device.label,
    )
    if memory is not None:
        return int(memory.total) // _MIB
    # Only used to derive profile names (memory share of the whole GPU); the catalog or the
    # full-GPU profile is close enough when the parent's memory is not readable in MIG mode.
    if model is not None:
        return model.profiles.total_memory_mb
    return max(gi.memory_mb for gi in gi_profiles)
