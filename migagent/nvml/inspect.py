"""Read everything NVML says about a node's MIG support, without changing anything (`migagent doctor`).

Only query functions are called: no mode change, no GI/CI create or destroy, no reset. That has a
price: NVML reports compute-instance profiles only through an existing GPU instance
(`nvmlGpuInstanceGetComputeInstanceProfileInfo` takes a GI handle), so CI profiles are read for the
GI profiles that have an instance on the GPU now, and reported as unread for the others. CI
profiles are enumerated until NVML answers INVALID_ARGUMENT (nvml.h: the end of the enum), not up
to the constant of the installed nvidia-ml-py, so a newer driver's profiles are not missed.
"""

from __future__ import annotations

from collections.abc import Callable
from ctypes import byref, c_uint
from dataclasses import dataclass, replace

import pynvml

from migagent.catalog import CiProfile, GiProfile, Placement
from migagent.errors import NoPermissionError, NotSupportedError, PermanentError
from migagent.nvml.device import Device, acquire, read_mig_mode
from migagent.nvml.enumerate import CI_ENUM_COUNT, profiles_by_enum
from migagent.nvml.errors import nvml_call, nvml_probe
from migagent.nvml.lib import GpuInstanceProfileInfo, Handle, NvmlLib
from migagent.nvml.observe import _gpu_instances_of
from migagent.nvml.profiles import gi_profile_from_info, read_gi_profile_infos

_NODE = "node"
_MIB = 1024 * 1024
_MEMORY_UNREADABLE = frozenset({pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_NO_PERMISSION})


@dataclass(frozen=True)
class GpuReport:
    """One physical GPU as NVML reports it. `ci_profiles_read`: GI profile ids whose CI rows are NVML's."""

    index: int
    name: str
    uuid: str
    pci_bus_id: str
    pci_device_id: int
    pci_subsystem_id: int | None
    mig_capable: bool
    mig_current: bool
    mig_pending: bool
    total_memory_mb: int | None
    gi_profiles: tuple[GiProfile, ...]
    ci_profiles_read: frozenset[int]
    # None where NVML cannot tell (NOT_SUPPORTED, an older driver, NO_PERMISSION): doctor says so.
    architecture: str | None = None
    persistence_mode: bool | None = None
    virtualization_mode: str | None = None
    unreadable: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeReport:
    driver_version: str
    nvml_version: str
    gpus: tuple[GpuReport, ...]
    confidential_computing: str | None = None


# A setting NVML cannot tell here: reported as unknown, never a failure of doctor.
_UNKNOWN = frozenset(
    {pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, pynvml.NVML_ERROR_NO_PERMISSION}
)
ARCHITECTURES = {
    int(pynvml.NVML_DEVICE_ARCH_AMPERE): "ampere",
    int(pynvml.NVML_DEVICE_ARCH_HOPPER): "hopper",
    int(pynvml.NVML_DEVICE_ARCH_BLACKWELL): "blackwell",
}
_VIRTUALIZATION = {
    int(pynvml.NVML_GPU_VIRTUALIZATION_MODE_NONE): "none (bare metal)",
    int(pynvml.NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH): "pass-through (a reset may be refused: reboot instead)",
    int(pynvml.NVML_GPU_VIRTUALIZATION_MODE_VGPU): "vGPU guest (MIG is managed by the host)",
    int(pynvml.NVML_GPU_VIRTUALIZATION_MODE_HOST_VGPU): "vGPU host",
    int(pynvml.NVML_GPU_VIRTUALIZATION_MODE_HOST_VSGA): "vSGA host",
}


def inspect_node(lib: NvmlLib) -> NodeReport:
    """Everything `doctor` prints, read with query calls only. NVML must be initialised."""
    with nvml_call("nvmlSystemGetDriverVersion", _NODE):
        driver_version = str(lib.nvmlSystemGetDriverVersion())
    with nvml_call("nvmlSystemGetNVMLVersion", _NODE):
        nvml_version = str(lib.nvmlSystemGetNVMLVersion())
    with nvml_call("nvmlDeviceGetCount", _NODE):
        count = lib.nvmlDeviceGetCount()
    cc = nvml_probe(
        lib.nvmlSystemGetConfComputeState, absent=_UNKNOWN, what="nvmlSystemGetConfComputeState", gpu_label=_NODE
    )
    return NodeReport(
        driver_version=driver_version,
        nvml_version=nvml_version,
        gpus=tuple(inspect_gpu(lib, index) for index in range(count)),
        confidential_computing=None if cc is None else ("on" if int(cc.ccFeature) else "off"),
    )


def inspect_gpu(lib: NvmlLib, index: int) -> GpuReport:
    device = acquire(lib, index)
    with nvml_call("nvmlDeviceGetName", device.label):
        name = str(lib.nvmlDeviceGetName(device.handle))
    with nvml_call("nvmlDeviceGetUUID", device.label):
        uuid = str(lib.nvmlDeviceGetUUID(device.handle))
    mode = read_mig_mode(lib, device)
    current, pending = mode if mode is not None else (False, False)
    # Some drivers refuse profile queries while MIG is disabled (docs/nvml.md §11): then none are listed.
    unreadable: list[str] = []
    gi_profiles: list[GiProfile] = []
    read: set[int] = set()
    try:
        infos = read_gi_profile_infos(lib, device) if mode is not None else []
        for enum, info in infos:
            ci_profiles = _ci_profiles_of_a_live_gi(lib, device, info) if current else None
            if ci_profiles is not None:
                read.add(int(info.id))
            gi_profiles.append(gi_profile_from_info(lib, device, enum, info, ci_profiles or ()))
    except NoPermissionError as exc:
        unreadable.append(f"profiles: {exc}")  # degrade: the rest of the report still helps
    memory = nvml_probe(
        lambda: lib.nvmlDeviceGetMemoryInfo(device.handle),
        absent=_MEMORY_UNREADABLE,
        what="nvmlDeviceGetMemoryInfo",
        gpu_label=device.label,
    )
    return GpuReport(
        index=index,
        name=name,
        uuid=uuid,
        pci_bus_id=device.pci_bus_id,
        pci_device_id=device.pci_device_id,
        pci_subsystem_id=device.pci_subsystem_id,
        mig_capable=mode is not None,
        mig_current=current,
        mig_pending=pending,
        total_memory_mb=int(memory.total) // _MIB if memory is not None else None,
        gi_profiles=tuple(sorted(gi_profiles, key=lambda gi: (gi.memory_mb, gi.slices, gi.enum_value))),
        ci_profiles_read=frozenset(read),
        architecture=_setting(lib.nvmlDeviceGetArchitecture, device, ARCHITECTURES, "nvmlDeviceGetArchitecture"),
        persistence_mode=_persistence(lib, device),
        virtualization_mode=_setting(
            lib.nvmlDeviceGetVirtualizationMode, device, _VIRTUALIZATION, "nvmlDeviceGetVirtualizationMode"
        ),
        unreadable=tuple(unreadable),
    )


def _setting(call: Callable[[Handle], int], device: Device, names: dict[int, str], what: str) -> str | None:
    value = nvml_probe(lambda: call(device.handle), absent=_UNKNOWN, what=what, gpu_label=device.label)
    return None if value is None else names.get(int(value), f"code {int(value)}")


def _persistence(lib: NvmlLib, device: Device) -> bool | None:
    mode = nvml_probe(
        lambda: lib.nvmlDeviceGetPersistenceMode(device.handle),
        absent=_UNKNOWN,
        what="nvmlDeviceGetPersistenceMode",
        gpu_label=device.label,
    )
    return None if mode is None else int(mode) == pynvml.NVML_FEATURE_ENABLED


def capture_gpu(lib: NvmlLib, index: int) -> GpuReport:
    """`doctor --capture`: one GI of each profile created in turn, its CI profiles and placements read
    through it, then destroyed; the GPU is left as found. Refused unless MIG is on and no GI exists."""
    report = inspect_gpu(lib, index)
    check_capturable(lib, report)
    device = acquire(lib, report.index)
    captured = [replace(gi, ci_profiles=_capture_ci_profiles(lib, device, gi)) for gi in report.gi_profiles]
    return replace(
        report, gi_profiles=tuple(captured), ci_profiles_read=frozenset(gi.id for gi in report.gi_profiles)
    )


def check_capturable(lib: NvmlLib, report: GpuReport) -> None:
    """Raise the one-line refusal of `--capture` for this GPU: MIG off, or a GI already on it."""
    device = acquire(lib, report.index)
    if not report.mig_current:
        raise PermanentError(
            f"{device.label}: doctor --capture needs MIG mode enabled (it creates GPU instances); enable it first,"
            " e.g. migagent apply -c all-enabled"
        )
    held = [gi.id for gi in report.gi_profiles if _gpu_instances_of(lib, device, gi.id, capacity=gi.max_instances)]
    if held:
        raise PermanentError(
            f"{device.label}: doctor --capture needs a GPU without GPU instances (it creates and destroys one of"
            f" each profile); this one holds instances of GI profile(s) {', '.join(map(str, held))}"
        )


def _capture_ci_profiles(lib: NvmlLib, device: Device, gi: GiProfile) -> tuple[CiProfile, ...]:
    if not gi.placements:
        return ()
    placement = pynvml.c_nvmlGpuInstancePlacement_t(gi.placements[0].start, gi.placements[0].size)
    with nvml_call(f"nvmlDeviceCreateGpuInstanceWithPlacement(profile {gi.id}, for --capture)", device.label):
        handle = lib.nvmlDeviceCreateGpuInstanceWithPlacement(device.handle, gi.id, byref(placement))
    try:
        return read_ci_profiles(lib, device, handle)
    finally:
        with nvml_call(f"nvmlGpuInstanceDestroy(profile {gi.id}, after --capture)", device.label):
            lib.nvmlGpuInstanceDestroy(handle)


def _ci_profiles_of_a_live_gi(
    lib: NvmlLib, device: Device, info: GpuInstanceProfileInfo
) -> tuple[CiProfile, ...] | None:
    """The CI profiles NVML offers in a GI of this profile, read through one that exists (None if none does)."""
    handles = _gpu_instances_of(lib, device, int(info.id), capacity=int(info.instanceCount))
    if not handles:
        return None
    try:
        return read_ci_profiles(lib, device, handles[0])
    except NotSupportedError:
        return None  # a driver older than R510 lists no CI placements: reported as not read


def read_ci_profiles(lib: NvmlLib, device: Device, gi: Handle) -> tuple[CiProfile, ...]:
    """Every CI profile of a GI, enumerating the CI enum until NVML says INVALID_ARGUMENT.

    The default CI is NVML's answer: the profile filling the GI (see `_with_default`)."""
    found: dict[int, CiProfile] = {}
    answers = profiles_by_enum(
        lambda enum: lib.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            gi, enum, pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
        ),
        what="nvmlGpuInstanceGetComputeInstanceProfileInfo",
        gpu_label=device.label,
        count=CI_ENUM_COUNT,
    )
    for _enum, info in answers:
        profile_id = int(info.id)
        if profile_id not in found:
            found[profile_id] = CiProfile(
                id=profile_id,
                slices=int(info.sliceCount),
                sms=int(info.multiprocessorCount),
                max_instances=int(info.instanceCount),
                placements=_ci_placements(lib, device, gi, profile_id),
                is_default=False,
            )
    profiles = tuple(found.values())
    return _with_default(profiles, gi_slices=max((ci.slices for ci in profiles), default=0))


def _ci_placements(lib: NvmlLib, device: Device, gi: Handle, profile_id: int) -> tuple[Placement, ...]:
    what = f"nvmlGpuInstanceGetComputeInstancePossiblePlacements(profile {profile_id})"
    count = c_uint(0)
    with nvml_call(what, device.label):
        lib.nvmlGpuInstanceGetComputeInstancePossiblePlacements(gi, profile_id, None, byref(count))
    if count.value == 0:
        return ()
    buffer = (pynvml.c_nvmlComputeInstancePlacement_t * count.value)()
    with nvml_call(what, device.label):
        lib.nvmlGpuInstanceGetComputeInstancePossiblePlacements(gi, profile_id, buffer, byref(count))
    return tuple(sorted(Placement(int(buffer[i].start), int(buffer[i].size)) for i in range(count.value)))


def _with_default(profiles: tuple[CiProfile, ...], *, gi_slices: int) -> tuple[CiProfile, ...]:
    """NVML does not flag the default CI; it is the one filling the GI, with the most SMs (a 1g REV1 CI)."""
    full = [ci for ci in profiles if ci.slices == gi_slices]
    # Most SMs (a 1g REV1 CI beats the plain 1c); on a tie the lower id: 7_SLICE (4), not 7_SLICE_NVL (8).
    default = max(full, key=lambda ci: (ci.sms, -ci.id), default=None)
    marked = (
        CiProfile(
            id=ci.id,
            slices=ci.slices,
            sms=ci.sms,
            max_instances=ci.max_instances,
            placements=ci.placements,
            is_default=ci is default,
        )
        for ci in profiles
    )
    return tuple(sorted(marked, key=lambda ci: ci.id))
