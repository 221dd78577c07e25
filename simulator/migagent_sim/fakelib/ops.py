"""The calls of the fake libnvidia-ml.so.1, one function per backend op, over FakeNvml.

Each op takes the C call's integer arguments (handles as the simulator's fake addresses) and
returns (ints, text) for the C side to write into the caller's structs; NVML errors propagate as
pynvml's NVMLError, which `backend.call` turns into the return code.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import pynvml

from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.handles import address_of

# What a driver of the R550 generation reports; FakeNvml has no driver version of its own.
DRIVER_VERSION = "550.127.05"
NVML_VERSION = "12.550.127.05"
CUDA_DRIVER_VERSION = 12040
_NOT_AVAILABLE = 0xFFFF_FFFF_FFFF_FFFF  # NVML_VALUE_NOT_AVAILABLE for an unsigned long long
_LIST_CAPACITY = 64  # more instances than any MIG profile allows

Op = Callable[[FakeNvml, int, int, int, int, str | None], tuple[tuple[int, ...], bytes | None]]


def as_handle(address: int) -> Any:
    return ctypes.c_void_p(address)


def _address(handle: Any) -> int:
    return address_of(handle) or 0


def _text(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def int_answer(*values: int) -> tuple[tuple[int, ...], None]:
    return tuple(int(v) for v in values), None


# --- library and system --------------------------------------------------------------------
def _init(fake: FakeNvml, flags: int, *_: Any) -> tuple[tuple[int, ...], None]:
    fake.nvmlInitWithFlags(flags)
    return (), None


def _shutdown(fake: FakeNvml, *_: Any) -> tuple[tuple[int, ...], None]:
    fake.nvmlShutdown()
    return (), None


def _version(name: str, default: str) -> Op:
    def op(fake: FakeNvml, *_: Any) -> tuple[tuple[int, ...], bytes]:
        own = getattr(fake, name, None)  # a simulator that models versions answers itself
        return (), _text(own() if callable(own) else default)

    return op


def _cuda_version(fake: FakeNvml, *_: Any) -> tuple[tuple[int, ...], None]:
    own = getattr(fake, "nvmlSystemGetCudaDriverVersion", None)
    return int_answer(own() if callable(own) else CUDA_DRIVER_VERSION)


# --- devices -------------------------------------------------------------------------------
def _pci_info(fake: FakeNvml, device: int, *_: Any) -> tuple[tuple[int, ...], bytes]:
    info = fake.nvmlDeviceGetPciInfo(as_handle(device))
    ints = int_answer(info.domain, info.bus, info.device, info.pciDeviceId, info.pciSubSystemId)[0]
    return ints, _text(info.busId)


def _memory(fake: FakeNvml, device: int, *_: Any) -> tuple[tuple[int, ...], None]:
    memory = fake.nvmlDeviceGetMemoryInfo(as_handle(device))
    return int_answer(memory.total, memory.free, memory.used)


def _processes(fake: FakeNvml, device: int, *_: Any) -> tuple[tuple[int, ...], None]:
    rows: list[int] = []
    for process in fake.nvmlDeviceGetComputeRunningProcesses_v3(as_handle(device)):
        memory = process.usedGpuMemory
        rows += [process.pid, _NOT_AVAILABLE if memory is None else memory]
        rows += [process.gpuInstanceId, process.computeInstanceId]
    return int_answer(*rows)


def _mig_mode(fake: FakeNvml, device: int, *_: Any) -> tuple[tuple[int, ...], None]:
    return int_answer(*fake.nvmlDeviceGetMigMode(as_handle(device)))


# --- GPU instances -------------------------------------------------------------------------
def _gi_profile_info(fake: FakeNvml, device: int, profile: int, *_: Any) -> tuple[tuple[int, ...], bytes]:
    info = fake.nvmlDeviceGetGpuInstanceProfileInfo(as_handle(device), profile)
    ints = int_answer(
        info.id, info.isP2pSupported, info.sliceCount, info.instanceCount, info.multiprocessorCount,
        info.copyEngineCount, info.decoderCount, info.encoderCount, info.jpegCount, info.ofaCount,
        info.memorySizeMB,
    )[0]  # fmt: skip
    return ints, _text(info.name)


def _placements(name: str, element: Any) -> Op:
    """GI or CI possible placements: (start, size) pairs, flattened."""

    def op(fake: FakeNvml, owner: int, profile_id: int, *_: Any) -> tuple[tuple[int, ...], None]:
        query = getattr(fake, name)
        count = ctypes.c_uint(0)
        query(as_handle(owner), profile_id, None, ctypes.byref(count))
        buffer = (element * count.value)()
        query(as_handle(owner), profile_id, buffer, ctypes.byref(count))
        return int_answer(*(v for p in buffer[: count.value] for v in (p.start, p.size)))

    return op


def _handle_list(list_call: Callable[..., object], element: Any, owner: int, profile_id: int) -> tuple[int, ...]:
    buffer = (element * _LIST_CAPACITY)()
    count = ctypes.c_uint(_LIST_CAPACITY)
    list_call(as_handle(owner), profile_id, buffer, ctypes.byref(count))
    return tuple(_address(buffer[i]) for i in range(count.value))


def _gpu_instances(fake: FakeNvml, device: int, profile_id: int, *_: Any) -> tuple[tuple[int, ...], None]:
    return _handle_list(fake.nvmlDeviceGetGpuInstances, pynvml.c_nvmlGpuInstance_t, device, profile_id), None


def _create_gi_at(fake: FakeNvml, device: int, profile_id: int, start: int, size: int, _: Any) -> Any:
    placement = pynvml.c_nvmlGpuInstancePlacement_t(start, size)
    gi = fake.nvmlDeviceCreateGpuInstanceWithPlacement(as_handle(device), profile_id, ctypes.byref(placement))
    return int_answer(_address(gi))


def _gi_info(fake: FakeNvml, gi: int, *_: Any) -> tuple[tuple[int, ...], None]:
    info = fake.nvmlGpuInstanceGetInfo(as_handle(gi))
    return int_answer(_address(info.device), info.id, info.profileId, info.placement.start, info.placement.size)


# --- compute instances ---------------------------------------------------------------------
def _ci_profile_info(fake: FakeNvml, gi: int, profile: int, engine: int, *_: Any) -> tuple[tuple[int, ...], bytes]:
    info = fake.nvmlGpuInstanceGetComputeInstanceProfileInfo(as_handle(gi), profile, engine)
    ints = int_answer(
        info.id, info.sliceCount, info.instanceCount, info.multiprocessorCount, info.sharedCopyEngineCount,
        info.sharedDecoderCount, info.sharedEncoderCount, info.sharedJpegCount, info.sharedOfaCount,
    )[0]  # fmt: skip
    return ints, _text(info.name)


def _compute_instances(fake: FakeNvml, gi: int, profile_id: int, *_: Any) -> tuple[tuple[int, ...], None]:
    return _handle_list(fake.nvmlGpuInstanceGetComputeInstances, pynvml.c_nvmlComputeInstance_t, gi, profile_id), None


def _create_ci_at(fake: FakeNvml, gi: int, profile_id: int, start: int, size: int, _: Any) -> Any:
    placement = pynvml.c_nvmlComputeInstancePlacement_t(start, size)
    ci = fake.nvmlGpuInstanceCreateComputeInstanceWithPlacement(as_handle(gi), profile_id, ctypes.byref(placement))
    return int_answer(_address(ci))


def _ci_info(fake: FakeNvml, ci: int, *_: Any) -> tuple[tuple[int, ...], None]:
    info = fake.nvmlComputeInstanceGetInfo(as_handle(ci))
    return int_answer(
        _address(info.device), _address(info.gpuInstance), info.id, info.profileId,
        info.placement.start, info.placement.size,
    )  # fmt: skip


# --- one-value calls -----------------------------------------------------------------------
def _returns_handle(name: str, *, arguments: int = 1) -> Op:
    """A call taking a handle (and maybe one integer) that returns a handle."""

    def op(fake: FakeNvml, owner: int, value: int, *_: Any) -> tuple[tuple[int, ...], None]:
        args = (as_handle(owner), value)[:arguments]
        return int_answer(_address(getattr(fake, name)(*args)))

    return op


def returns_int(name: str, *, arguments: int = 1) -> Op:
    def op(fake: FakeNvml, owner: int, value: int, *_: Any) -> tuple[tuple[int, ...], None]:
        result = getattr(fake, name)(*(as_handle(owner), value)[:arguments])
        return int_answer(getattr(result, "value", result))  # IsMigDeviceHandle returns a c_uint

    return op


def _returns_text(name: str) -> Op:
    def op(fake: FakeNvml, owner: int, *_: Any) -> tuple[tuple[int, ...], bytes]:
        return (), _text(getattr(fake, name)(as_handle(owner)))

    return op


def _by_text(name: str) -> Op:
    def op(fake: FakeNvml, _a0: int, _a1: int, _a2: int, _a3: int, text: str | None) -> tuple[tuple[int, ...], None]:
        return int_answer(_address(getattr(fake, name)(text or "")))

    return op


def _no_result(name: str) -> Op:
    def op(fake: FakeNvml, owner: int, *_: Any) -> tuple[tuple[int, ...], None]:
        getattr(fake, name)(as_handle(owner))
        return (), None

    return op


def _device_count(fake: FakeNvml, *_: Any) -> tuple[tuple[int, ...], None]:
    return int_answer(fake.nvmlDeviceGetCount())


def _handle_by_index(fake: FakeNvml, index: int, *_: Any) -> tuple[tuple[int, ...], None]:
    return int_answer(_address(fake.nvmlDeviceGetHandleByIndex(index)))


def _set_mig_mode(fake: FakeNvml, device: int, mode: int, *_: Any) -> tuple[tuple[int, ...], None]:
    return int_answer(fake.nvmlDeviceSetMigMode(as_handle(device), mode))


OPS: dict[str, Op] = {
    "init": _init,
    "shutdown": _shutdown,
    "driver_version": _version("nvmlSystemGetDriverVersion", DRIVER_VERSION),
    "nvml_version": _version("nvmlSystemGetNVMLVersion", NVML_VERSION),
    "cuda_driver_version": _cuda_version,
    "device_count": _device_count,
    "handle_by_index": _handle_by_index,
    "handle_by_uuid": _by_text("nvmlDeviceGetHandleByUUID"),
    "handle_by_pci_bus_id": _by_text("nvmlDeviceGetHandleByPciBusId"),
    "name": _returns_text("nvmlDeviceGetName"),
    "uuid": _returns_text("nvmlDeviceGetUUID"),
    "pci_info": _pci_info,
    "memory_info": _memory,
    "compute_processes": _processes,
    "mig_mode": _mig_mode,
    "set_mig_mode": _set_mig_mode,
    "gi_profile_info": _gi_profile_info,
    "gi_possible_placements": _placements(
        "nvmlDeviceGetGpuInstancePossiblePlacements", pynvml.c_nvmlGpuInstancePlacement_t
    ),
    "gi_remaining_capacity": returns_int("nvmlDeviceGetGpuInstanceRemainingCapacity", arguments=2),
    "create_gi": _returns_handle("nvmlDeviceCreateGpuInstance", arguments=2),
    "create_gi_at": _create_gi_at,
    "gpu_instances": _gpu_instances,
    "gi_by_id": _returns_handle("nvmlDeviceGetGpuInstanceById", arguments=2),
    "gi_info": _gi_info,
    "gi_destroy": _no_result("nvmlGpuInstanceDestroy"),
    "ci_profile_info": _ci_profile_info,
    "ci_possible_placements": _placements(
        "nvmlGpuInstanceGetComputeInstancePossiblePlacements", pynvml.c_nvmlComputeInstancePlacement_t
    ),
    "ci_remaining_capacity": returns_int("nvmlGpuInstanceGetComputeInstanceRemainingCapacity", arguments=2),
    "create_ci": _returns_handle("nvmlGpuInstanceCreateComputeInstance", arguments=2),
    "create_ci_at": _create_ci_at,
    "compute_instances": _compute_instances,
    "ci_by_id": _returns_handle("nvmlGpuInstanceGetComputeInstanceById", arguments=2),
    "ci_info": _ci_info,
    "ci_destroy": _no_result("nvmlComputeInstanceDestroy"),
    "max_mig_device_count": returns_int("nvmlDeviceGetMaxMigDeviceCount"),
    "gpu_instance_id": returns_int("nvmlDeviceGetGpuInstanceId"),
    "compute_instance_id": returns_int("nvmlDeviceGetComputeInstanceId"),
    "is_mig_device_handle": returns_int("nvmlDeviceIsMigDeviceHandle"),
    "mig_device_handle_by_index": _returns_handle("nvmlDeviceGetMigDeviceHandleByIndex", arguments=2),
    "device_handle_from_mig_device_handle": _returns_handle("nvmlDeviceGetDeviceHandleFromMigDeviceHandle"),
}
