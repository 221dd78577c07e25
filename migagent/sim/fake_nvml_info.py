"""FakeNvml's answers to what the device plugin and GPU Feature Discovery read besides MIG: the device
minor, CUDA compute capability, brand, a MIG device's attributes and the health events a GPU supports.
"""

from __future__ import annotations

from typing import Any

import pynvml

from migagent.catalog.model import Architecture
from migagent.sim.core import FakeCore, nvml_api
from migagent.sim.handles import HandleKind, nvml_error

# CUDA compute capability per chip [doc: NVIDIA's CUDA GPUs table]: GA100 8.0, GH100 9.0, B200/GB200 10.0,
# B300/GB300 (Blackwell Ultra) 10.3, RTX PRO 6000 Blackwell (GB202) 12.0.
_COMPUTE_CAPABILITY = {Architecture.AMPERE: (8, 0), Architecture.HOPPER: (9, 0), Architecture.BLACKWELL: (10, 0)}
_COMPUTE_CAPABILITY_BY_MODEL = {"B300-288GB": (10, 3), "GB300-288GB": (10, 3), "RTX-PRO-6000-96GB": (12, 0)}
# What a data-centre GPU without a fabric reports: ECC errors, XIDs, P-state and clock changes, MIG
# configuration changes (nvmlEventType* bits of nvml.h).
SUPPORTED_EVENT_TYPES: int = (
    pynvml.nvmlEventTypeSingleBitEccError
    | pynvml.nvmlEventTypeDoubleBitEccError
    | pynvml.nvmlEventTypePState
    | pynvml.nvmlEventTypeXidCriticalError
    | pynvml.nvmlEventTypeClock
    | 0x100  # nvmlEventMigConfigChange (not in every pynvml)
)


class InfoApi(FakeCore):
    @nvml_api()
    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:  # noqa: N802
        """The N of /dev/nvidiaN: the GPU's index on the simulated node. A MIG device has none of its
        own [?: NOT_SUPPORTED assumed; the tools ask the parent]."""
        target = self._target(handle, HandleKind.DEVICE, HandleKind.MIG_DEVICE)
        if target.kind is HandleKind.MIG_DEVICE:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return target.gpu

    @nvml_api()
    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:  # noqa: N802
        """The chip's; a MIG device answers its parent's."""
        model = self.model(self._target(handle, HandleKind.DEVICE, HandleKind.MIG_DEVICE).gpu)
        return _COMPUTE_CAPABILITY_BY_MODEL.get(model.key, _COMPUTE_CAPABILITY[model.architecture])

    @nvml_api()
    def nvmlDeviceGetBrand(self, handle: Any) -> int:  # noqa: N802
        """Data-centre boards report the NVIDIA brand on current drivers (`Product Brand: NVIDIA`)."""
        self._target(handle, HandleKind.DEVICE, HandleKind.MIG_DEVICE)
        return int(pynvml.NVML_BRAND_NVIDIA)

    @nvml_api()
    def nvmlDeviceGetAttributes_v2(self, device: Any) -> Any:  # noqa: N802
        """A MIG device's attributes: its CI's SMs and slices, its GI's engines, slices and memory.
        nvml.h: "only supports MIG device handles", so a GPU handle is NOT_SUPPORTED."""
        target = self._target(device, HandleKind.DEVICE, HandleKind.MIG_DEVICE)
        if target.kind is HandleKind.DEVICE:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        index, gi, ci = self._compute_instance(device, HandleKind.MIG_DEVICE)
        gi_profile = self._gi_profile(index, gi)
        ci_profile = gi_profile.ci_profile(ci.profile_id)
        if ci_profile is None:  # only a hand-edited state file can get here
            raise nvml_error(pynvml.NVML_ERROR_UNKNOWN)
        attributes = pynvml.c_nvmlDeviceAttributes()
        attributes.multiprocessorCount = ci_profile.sms
        attributes.sharedCopyEngineCount = gi_profile.engines.copy
        attributes.sharedDecoderCount = gi_profile.engines.decoders
        attributes.sharedEncoderCount = gi_profile.engines.encoders
        attributes.sharedJpegCount = gi_profile.engines.jpeg
        attributes.sharedOfaCount = gi_profile.engines.ofa
        attributes.gpuInstanceSliceCount = gi_profile.slices
        attributes.computeInstanceSliceCount = ci_profile.slices
        attributes.memorySizeMB = gi_profile.memory_mb
        return attributes

    @nvml_api()
    def nvmlDeviceGetAttributes(self, device: Any) -> Any:  # noqa: N802
        return self.nvmlDeviceGetAttributes_v2(device)

    @nvml_api()
    def nvmlDeviceGetSupportedEventTypes(self, handle: Any) -> int:  # noqa: N802
        """A GPU's event mask; events are registered on GPUs, not MIG devices [?: NOT_SUPPORTED assumed]."""
        target = self._target(handle, HandleKind.DEVICE, HandleKind.MIG_DEVICE)
        if target.kind is HandleKind.MIG_DEVICE:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SUPPORTED_EVENT_TYPES
