"""The slice of pynvml that `GpuDriver` calls, as a structural type.

In production `lib` is the real `pynvml` module; in tests it is `migagent.sim.FakeNvml`, which has
the same function names and return shapes. Parameters are positional-only so that only their
order, as in pynvml, has to match. Handles are pynvml's opaque ctypes pointers (`c_nvmlDevice_t`,
`c_nvmlGpuInstance_t`, `c_nvmlComputeInstance_t`), which we only ever pass back, so they are `Any`.
The structures pynvml returns are described by the small read-only protocols below, naming only
the fields we read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

Handle = Any


class PlacementStruct(Protocol):
    @property
    def start(self) -> int: ...
    @property
    def size(self) -> int: ...


class PciInfo(Protocol):
    @property
    def busId(self) -> str | bytes: ...  # noqa: N802  (pynvml's field name)
    @property
    def pciDeviceId(self) -> int: ...  # noqa: N802
    @property
    def pciSubSystemId(self) -> int: ...  # noqa: N802


class MemoryInfo(Protocol):
    @property
    def total(self) -> int: ...


class ProcessInfo(Protocol):
    @property
    def pid(self) -> int: ...
    @property
    def usedGpuMemory(self) -> int | None: ...  # noqa: N802


class GpuInstanceProfileInfo(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def sliceCount(self) -> int: ...  # noqa: N802
    @property
    def instanceCount(self) -> int: ...  # noqa: N802
    @property
    def multiprocessorCount(self) -> int: ...  # noqa: N802
    @property
    def copyEngineCount(self) -> int: ...  # noqa: N802
    @property
    def decoderCount(self) -> int: ...  # noqa: N802
    @property
    def encoderCount(self) -> int: ...  # noqa: N802
    @property
    def jpegCount(self) -> int: ...  # noqa: N802
    @property
    def ofaCount(self) -> int: ...  # noqa: N802
    @property
    def memorySizeMB(self) -> int: ...  # noqa: N802


class ComputeInstanceProfileInfo(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def instanceCount(self) -> int: ...  # noqa: N802
    @property
    def sliceCount(self) -> int: ...  # noqa: N802
    @property
    def multiprocessorCount(self) -> int: ...  # noqa: N802


class GpuInstanceInfo(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def profileId(self) -> int: ...  # noqa: N802
    @property
    def placement(self) -> PlacementStruct: ...


class ComputeInstanceInfo(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def profileId(self) -> int: ...  # noqa: N802
    @property
    def placement(self) -> PlacementStruct: ...


class ConfComputeState(Protocol):
    @property
    def ccFeature(self) -> int: ...  # noqa: N802


class NvmlLib(Protocol):
    """Exactly the pynvml functions the driver calls (same names, same argument order)."""

    def nvmlInit(self) -> object: ...  # noqa: N802
    def nvmlShutdown(self) -> object: ...  # noqa: N802
    def nvmlDeviceGetCount(self) -> int: ...  # noqa: N802
    def nvmlSystemGetDriverVersion(self) -> str: ...  # noqa: N802
    def nvmlSystemGetNVMLVersion(self) -> str: ...  # noqa: N802
    def nvmlDeviceGetHandleByIndex(self, index: int, /) -> Handle: ...  # noqa: N802
    def nvmlDeviceGetName(self, device: Handle, /) -> str: ...  # noqa: N802
    def nvmlDeviceGetUUID(self, device: Handle, /) -> str: ...  # noqa: N802
    def nvmlDeviceGetPciInfo(self, device: Handle, /) -> PciInfo: ...  # noqa: N802
    def nvmlDeviceGetMemoryInfo(self, device: Handle, /) -> MemoryInfo: ...  # noqa: N802
    def nvmlDeviceGetComputeRunningProcesses(  # noqa: N802
        self, device: Handle, /
    ) -> Sequence[ProcessInfo]: ...
    def nvmlDeviceGetMigMode(self, device: Handle, /) -> Sequence[int]: ...  # noqa: N802
    def nvmlDeviceGetPersistenceMode(self, device: Handle, /) -> int: ...  # noqa: N802
    def nvmlDeviceGetVirtualizationMode(self, device: Handle, /) -> int: ...  # noqa: N802
    def nvmlDeviceGetArchitecture(self, device: Handle, /) -> int: ...  # noqa: N802
    def nvmlSystemGetConfComputeState(self) -> ConfComputeState: ...  # noqa: N802
    def nvmlDeviceSetMigMode(self, device: Handle, mode: int, /) -> int: ...  # noqa: N802
    def nvmlDeviceGetGpuInstanceProfileInfo(  # noqa: N802
        self, device: Handle, profile: int, /
    ) -> GpuInstanceProfileInfo: ...
    def nvmlDeviceGetGpuInstancePossiblePlacements(  # noqa: N802
        self, device: Handle, profile_id: int, placements_ref: Any, count_ref: Any, /
    ) -> object: ...
    def nvmlDeviceCreateGpuInstanceWithPlacement(  # noqa: N802
        self, device: Handle, profile_id: int, placement: Any, /
    ) -> Handle: ...
    def nvmlDeviceGetGpuInstances(  # noqa: N802
        self, device: Handle, profile_id: int, instances_ref: Any, count_ref: Any, /
    ) -> object: ...
    def nvmlDeviceGetGpuInstanceById(self, device: Handle, gi_id: int, /) -> Handle: ...  # noqa: N802
    def nvmlGpuInstanceGetInfo(self, gpu_instance: Handle, /) -> GpuInstanceInfo: ...  # noqa: N802
    def nvmlGpuInstanceDestroy(self, gpu_instance: Handle, /) -> object: ...  # noqa: N802
    def nvmlGpuInstanceGetComputeInstanceProfileInfo(  # noqa: N802
        self, gpu_instance: Handle, profile: int, eng_profile: int, /
    ) -> ComputeInstanceProfileInfo: ...
    def nvmlGpuInstanceGetComputeInstancePossiblePlacements(  # noqa: N802
        self, gpu_instance: Handle, profile_id: int, placements_ref: Any, count_ref: Any, /
    ) -> object: ...
    def nvmlGpuInstanceCreateComputeInstance(  # noqa: N802
        self, gpu_instance: Handle, profile_id: int, /
    ) -> Handle: ...
    def nvmlGpuInstanceCreateComputeInstanceWithPlacement(  # noqa: N802
        self, gpu_instance: Handle, profile_id: int, placement: Any, /
    ) -> Handle: ...
    def nvmlGpuInstanceGetComputeInstances(  # noqa: N802
        self, gpu_instance: Handle, profile_id: int, instances_ref: Any, count_ref: Any, /
    ) -> object: ...
    def nvmlGpuInstanceGetComputeInstanceById(  # noqa: N802
        self, gpu_instance: Handle, ci_id: int, /
    ) -> Handle: ...
    def nvmlComputeInstanceGetInfo(self, compute_instance: Handle, /) -> ComputeInstanceInfo: ...  # noqa: N802
    def nvmlComputeInstanceDestroy(self, compute_instance: Handle, /) -> object: ...  # noqa: N802
    def nvmlDeviceGetMaxMigDeviceCount(self, device: Handle, /) -> int: ...  # noqa: N802
    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Handle, index: int, /) -> Handle: ...  # noqa: N802
    def nvmlDeviceGetGpuInstanceId(self, mig_device: Handle, /) -> int: ...  # noqa: N802
    def nvmlDeviceGetComputeInstanceId(self, mig_device: Handle, /) -> int: ...  # noqa: N802
