"""FakeNvml's device-level pynvml surface: init, enumeration, identity, memory, processes, MIG devices."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import pynvml

from migagent.catalog.model import Architecture
from migagent.sim.core import NO_INSTANCE_ID, FakeCore, nvml_api
from migagent.sim.device_bus import index_by_bus_id, parse_bus_id
from migagent.sim.handles import HandleKind, nvml_error
from migagent.sim.state import SimProcess

_MIB = 1024 * 1024
_ARCHITECTURES = {
    Architecture.AMPERE: pynvml.NVML_DEVICE_ARCH_AMPERE,
    Architecture.HOPPER: pynvml.NVML_DEVICE_ARCH_HOPPER,
    Architecture.BLACKWELL: pynvml.NVML_DEVICE_ARCH_BLACKWELL,
}
P = ParamSpec("P")
R = TypeVar("R")
# Texts the real library returns for codes pynvml does not know itself (docs/nvml.md §1, observed).
_ERROR_TEXTS = {
    pynvml.NVML_ERROR_IN_USE: "In use by another client",
    pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES: "Insufficient Resources",
}
def _throw_on_version_mismatch(fn: Callable[P, R]) -> Callable[P, R]:
    """pynvml's `throwOnVersionMismatch`: an unversioned call whose versioned symbol the driver lacks
    raises NVMLLibraryMismatchError instead of NVMLError(FUNCTION_NOT_FOUND)."""

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except pynvml.NVMLError_FunctionNotFound as exc:
            raise pynvml.NVMLLibraryMismatchError(
                f"Unversioned function called and the pyNVML version does not match the NVML lib version."
                f" Either use matching pyNVML and NVML lib versions or use a versioned function such as"
                f" {fn.__name__}_v2"
            ) from exc

    return call


def simulated_subsystem_id(pci_device_id: int) -> int:
    """The simulated board's PCI subsystem id, 0xSSSSVVVV: an NVIDIA-built board (subsystem vendor
    0x10DE) whose subsystem device is the chip's device id [inf: a stand-in, never 0 as no real board is]."""
    return (pci_device_id & 0xFFFF0000) | 0x10DE


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


class DeviceApi(FakeCore):
    # --- library lifetime -------------------------------------------------------------------
    @nvml_api(needs_init=False)
    def nvmlInitWithFlags(self, flags: int) -> None:  # noqa: N802
        del flags  # no flag changes what a simulated node reports
        self._init_count += 1

    @nvml_api(needs_init=False)
    def nvmlInit(self) -> None:  # noqa: N802
        self._init_count += 1

    @nvml_api(needs_init=False)
    def nvmlShutdown(self) -> None:  # noqa: N802
        """Reference-counted like NVML; an extra shutdown is harmless."""
        self._init_count = max(0, self._init_count - 1)

    @nvml_api(needs_init=False)
    def nvmlErrorString(self, result: int) -> str:  # noqa: N802
        if result in _ERROR_TEXTS:
            return _ERROR_TEXTS[result]
        known: dict[int, str] = pynvml.NVMLError._errcode_to_string
        return known.get(result, f"NVML Error with code {result}")

    # --- settings doctor and the reset checks read -------------------------------------------
    # Per node, not saved in the state file: bare metal, persistence off, confidential computing off.
    sim_persistence_mode = pynvml.NVML_FEATURE_DISABLED
    sim_virtualization_mode = pynvml.NVML_GPU_VIRTUALIZATION_MODE_NONE
    sim_conf_compute_feature = 0  # NVML_CC_SYSTEM_FEATURE_DISABLED

    @nvml_api()
    def nvmlDeviceGetPersistenceMode(self, device: Any) -> int:  # noqa: N802
        self._physical(device)
        return int(self.sim_persistence_mode)

    @nvml_api()
    def nvmlDeviceGetVirtualizationMode(self, device: Any) -> int:  # noqa: N802
        self._physical(device)
        return int(self.sim_virtualization_mode)

    @nvml_api()
    def nvmlDeviceGetArchitecture(self, device: Any) -> int:  # noqa: N802
        index, _gpu = self._physical(device)
        return int(_ARCHITECTURES[self.model(index).architecture])

    @nvml_api()
    def nvmlSystemGetConfComputeState(self) -> Any:  # noqa: N802
        state = pynvml.c_nvmlConfComputeSystemState_t()
        state.environment, state.ccFeature, state.devToolsMode = 0, self.sim_conf_compute_feature, 0
        return state

    # --- versions ---------------------------------------------------------------------------
    # A simulated driver; real ones return e.g. "580.65.06" and NVML "13.580.65.06" (the CUDA major first).
    sim_driver_version = "580.65.06"
    sim_nvml_version = "13.580.65.06"
    sim_cuda_driver_version = 13000  # CUDA 13.0, the version R580 drivers support (1000 * major + 10 * minor)

    @nvml_api()
    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return self.sim_driver_version

    @nvml_api()
    def nvmlSystemGetNVMLVersion(self) -> str:  # noqa: N802
        return self.sim_nvml_version

    @nvml_api()
    def nvmlSystemGetCudaDriverVersion(self) -> int:  # noqa: N802
        return self.sim_cuda_driver_version

    @nvml_api()
    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:  # noqa: N802
        return self.sim_cuda_driver_version

    # --- enumeration ------------------------------------------------------------------------
    @nvml_api()
    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        """Physical GPUs only; MIG devices are never counted."""
        return len(self.state.gpus)

    @nvml_api()
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:  # noqa: N802
        if not isinstance(index, int) or not 0 <= index < len(self.state.gpus):
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._device_handle(index)

    @nvml_api()
    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> Any:  # noqa: N802
        """`GPU-...` gives the physical GPU, `MIG-...` the MIG device (nvml.h)."""
        wanted = _text(uuid)
        for index, gpu in enumerate(self.state.gpus):
            if gpu.uuid == wanted:
                return self._device_handle(index)
            for gi, ci in self._mig_devices(gpu):
                if ci.uuid == wanted:
                    return self._mig_handle(index, gi, ci)
        raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)

    @nvml_api()
    def nvmlDeviceGetHandleByPciBusId(self, pciBusId: str | bytes) -> Any:  # noqa: N802, N803
        return self._device_handle(index_by_bus_id(self.state, pciBusId))

    # --- identity ---------------------------------------------------------------------------
    @nvml_api()
    def nvmlDeviceGetName(self, handle: Any) -> str:  # noqa: N802
        """A MIG device is named `<parent name> MIG <profile>` (docs/nvml.md §3)."""
        target = self._target(handle, HandleKind.DEVICE, HandleKind.MIG_DEVICE)
        parent = self.model(target.gpu).name
        if target.kind is HandleKind.DEVICE:
            return parent
        gpu_index, gi, ci = self._compute_instance(handle, HandleKind.MIG_DEVICE)
        return f"{parent} MIG {self._ci_name(gpu_index, gi, ci)}"

    @nvml_api()
    def nvmlDeviceGetUUID(self, handle: Any) -> str:  # noqa: N802
        target = self._target(handle, HandleKind.DEVICE, HandleKind.MIG_DEVICE)
        if target.kind is HandleKind.DEVICE:
            return self.state.gpus[target.gpu].uuid
        return self._compute_instance(handle, HandleKind.MIG_DEVICE)[2].uuid

    @nvml_api()
    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:  # noqa: N802
        """On a MIG handle this returns the parent's PCI info [?: undocumented in nvml.h]. Real boards
        report a nonzero subsystem id, which subsystem-qualified device filters match on."""
        target = self._target(handle, HandleKind.DEVICE, HandleKind.MIG_DEVICE)
        gpu = self.state.gpus[target.gpu]
        domain, bus, device = parse_bus_id(gpu.pci_bus_id) or (0, 0, 0)
        info = pynvml.nvmlPciInfo_t()
        info.busId = gpu.pci_bus_id
        info.busIdLegacy = f"{domain:04X}:{bus:02X}:{device:02X}.0"
        info.domain, info.bus, info.device = domain, bus, device
        info.pciDeviceId = self.model(target.gpu).primary_pci_device_id
        info.pciSubSystemId = simulated_subsystem_id(self.model(target.gpu).primary_pci_device_id)
        return info

    # --- memory and processes ---------------------------------------------------------------
    @nvml_api()
    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:  # noqa: N802
        """Whole-GPU memory on a physical handle; the GI's memory on a MIG handle."""
        target = self._target(handle, HandleKind.DEVICE, HandleKind.MIG_DEVICE)
        if target.kind is HandleKind.DEVICE:
            gpu = self.state.gpus[target.gpu]
            total = self.model(target.gpu).profiles.total_memory_mb * _MIB
            used = sum(p.used_memory_bytes or 0 for p in self._all_processes(gpu))
        else:
            gpu_index, gi, _ci = self._compute_instance(handle, HandleKind.MIG_DEVICE)
            total = self._gi_profile(gpu_index, gi).memory_mb * _MIB
            used = sum(p.used_memory_bytes or 0 for ci in gi.compute_instances for p in ci.processes)
        memory = pynvml.c_nvmlMemory_v2_t() if version else pynvml.c_nvmlMemory_t()
        if version:
            memory.version = version
            memory.reserved = 0
        memory.total, memory.used, memory.free = total, used, max(0, total - used)
        return memory

    @_throw_on_version_mismatch
    @nvml_api()
    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:  # noqa: N802
        """pynvml's unversioned call: `_v3`; a driver without it (FUNCTION_NOT_FOUND, injectable here)
        makes pynvml raise NVMLLibraryMismatchError, which is not an NVMLError."""
        return self.nvmlDeviceGetComputeRunningProcesses_v3(handle)

    @nvml_api()
    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any) -> list[Any]:  # noqa: N802
        """Parent: every process, with its GI/CI IDs; MIG handle: only that CI's processes."""
        return self._running_processes(handle)

    def _running_processes(self, handle: Any) -> list[Any]:
        target = self._target(handle, HandleKind.DEVICE, HandleKind.MIG_DEVICE)
        if target.kind is HandleKind.MIG_DEVICE:
            _index, gi, ci = self._compute_instance(handle, HandleKind.MIG_DEVICE)
            rows = [(p, gi.id, ci.id) for p in ci.processes]
        else:
            gpu = self.state.gpus[target.gpu]
            rows = [(p, NO_INSTANCE_ID, NO_INSTANCE_ID) for p in gpu.processes]
            rows += [(p, gi.id, ci.id) for gi, ci in self._mig_devices(gpu) for p in ci.processes]
        return [_process_object(p, gi_id, ci_id) for p, gi_id, ci_id in rows]

    @nvml_api()
    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: Any) -> list[Any]:  # noqa: N802
        """The older entry point (same rows); a driver without `_v3` still has it. Inject
        FUNCTION_NOT_FOUND into nvmlDeviceGetComputeRunningProcesses to model such a driver."""
        return self._running_processes(handle)

    # --- MIG devices --------------------------------------------------------------------------
    @nvml_api()
    def nvmlDeviceIsMigDeviceHandle(self, device: Any) -> Any:  # noqa: N802
        """A `ctypes.c_uint`, as pynvml returns it (so `r == 1` is False; use `r.value`)."""
        target = self._target(device, HandleKind.DEVICE, HandleKind.MIG_DEVICE)
        return ctypes.c_uint(1 if target.kind is HandleKind.MIG_DEVICE else 0)

    @nvml_api()
    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:  # noqa: N802
        return self._mig_ids(device)[0]

    @nvml_api()
    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:  # noqa: N802
        return self._mig_ids(device)[1]

    def _mig_ids(self, device: Any) -> tuple[int, int]:
        target = self._target(device, HandleKind.DEVICE, HandleKind.MIG_DEVICE)
        if target.kind is HandleKind.DEVICE:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        _gpu, gi, ci = self._compute_instance(device, HandleKind.MIG_DEVICE)
        return gi.id, ci.id

    @nvml_api()
    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:  # noqa: N802
        """The model's maximum while MIG is enabled, else 0 (nvml.h)."""
        index, gpu = self._physical(device)
        return self.model(index).max_mig_devices if self._mig_enabled(gpu) else 0

    @nvml_api()
    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any:  # noqa: N802
        """NOT_FOUND for an empty slot below the maximum; INVALID_ARGUMENT at or past it."""
        gpu_index, gpu = self._physical(device)
        limit = self.model(gpu_index).max_mig_devices if self._mig_enabled(gpu) else 0
        if not 0 <= index < limit:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        devices = self._mig_devices(gpu)
        if index >= len(devices):
            raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
        gi, ci = devices[index]
        return self._mig_handle(gpu_index, gi, ci)

    @nvml_api()
    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice: Any) -> Any:  # noqa: N802, N803
        gpu_index, _gi, _ci = self._compute_instance(migDevice, HandleKind.MIG_DEVICE)
        return self._device_handle(gpu_index)


def _process_object(process: SimProcess, gi_id: int, ci_id: int) -> Any:
    info = pynvml.c_nvmlProcessInfo_t()
    unknown = process.used_memory_bytes is None
    info.pid = process.pid
    info.usedGpuMemory = pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value if unknown else process.used_memory_bytes
    info.gpuInstanceId, info.computeInstanceId = gi_id, ci_id
    # pynvml hands callers this "friendly object" (pid, usedGpuMemory, gpuInstanceId, computeInstanceId),
    # with usedGpuMemory None where NVML answered NVML_VALUE_NOT_AVAILABLE.
    friendly = pynvml.nvmlStructToFriendlyObject(info)
    if unknown:
        friendly.usedGpuMemory = None
    return friendly
