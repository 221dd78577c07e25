"""FakeNvml's GPU-instance surface: GI profiles, placements, capacity, create, list, destroy.

GI profile *enums* (0..17) are accepted only by nvmlDeviceGetGpuInstanceProfileInfo; every other
call takes the profile *ID* that it returns (docs/nvml.md §2).
"""

from __future__ import annotations

from typing import Any

import pynvml

from migagent.catalog import GiProfile, GpuModel, Placement
from migagent.catalog.model import GI_PROFILE_ENUM_COUNT
from migagent.layout.profile import gi_profile_name
from migagent.sim.core import FakeCore, nvml_api
from migagent.sim.handles import fill_array, fill_handle_array, nvml_error, read_placement
from migagent.sim.placement import (
    choose_gi_placement,
    free_gi_placements,
    gi_id_for,
    gi_remaining_capacity,
)
from migagent.sim.state import SimGpu, SimGpuInstance


def gi_enum_count(model: GpuModel) -> int:
    """The simulated driver's GI enum count: pynvml's, or more when the model has newer profiles."""
    return max(GI_PROFILE_ENUM_COUNT, *(profile.enum_value + 1 for profile in model.profiles.gi_profiles))


def _gi_profile_info(model: GpuModel, profile: GiProfile, version: int) -> Any:
    if version == 2:
        info = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
        info.name = f"MIG {gi_profile_name(profile, model.profiles)}"
    elif version == 1:
        info = pynvml.c_nvmlGpuInstanceProfileInfo_t()
    else:  # what pynvml itself raises for an unknown version
        raise nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    info.id = profile.id
    info.isP2pSupported = 0  # "P2P No" in every capture (docs/nvml.md §3)
    info.sliceCount = profile.slices
    info.instanceCount = profile.max_instances
    info.multiprocessorCount = profile.sms
    info.copyEngineCount = profile.engines.copy
    info.decoderCount = profile.engines.decoders
    info.encoderCount = profile.engines.encoders
    info.jpegCount = profile.engines.jpeg
    info.ofaCount = profile.engines.ofa
    info.memorySizeMB = profile.memory_mb
    return info


class GpuInstanceApi(FakeCore):
    def _require_profiles_queryable(self, gpu: SimGpu) -> None:
        """Older drivers answer profile queries only in MIG mode (docs/nvml.md §11); configurable."""
        if not self._mig_enabled(gpu) and not self.state.profiles_queryable_when_disabled:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def _gi_profile_by_id(self, gpu_index: int, profile_id: int, *, missing: int) -> GiProfile:
        profile = self.model(gpu_index).profiles.gi_profile(profile_id)
        if profile is None:
            raise nvml_error(missing)
        return profile

    @nvml_api()
    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int, version: int = 2) -> Any:  # noqa: N802
        """Query by NVML_GPU_INSTANCE_PROFILE_* enum: past the driver's last enum INVALID_ARGUMENT (the
        end of nvml.h's enumeration), an enum the model lacks NOT_SUPPORTED; the returned `id` is the
        profile ID other calls take."""
        index, gpu = self._physical(device)
        if not isinstance(profile, int) or not 0 <= profile < gi_enum_count(self.model(index)):
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        self._require_profiles_queryable(gpu)
        found = self.model(index).profiles.gi_profile_by_enum(profile)
        if found is None:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return _gi_profile_info(self.model(index), found, version)

    @nvml_api()
    def nvmlDeviceGetGpuInstanceProfileInfoById(self, device: Any, profileId: int) -> Any:  # noqa: N802, N803
        index, gpu = self._physical(device)
        self._require_profiles_queryable(gpu)
        profile = self._gi_profile_by_id(index, profileId, missing=pynvml.NVML_ERROR_NOT_SUPPORTED)
        return _gi_profile_info(self.model(index), profile, 2)

    @nvml_api()
    def nvmlDeviceGetGpuInstancePossiblePlacements(  # noqa: N802
        self,
        device: Any,
        profileId: int,  # noqa: N803
        placementsRef: Any,  # noqa: N803
        countRef: Any,  # noqa: N803
    ) -> int:
        """Every legal placement, occupied or not, whether MIG is enabled or not (nvml.h)."""
        index, _gpu = self._physical(device)
        profile = self._gi_profile_by_id(index, profileId, missing=pynvml.NVML_ERROR_NOT_SUPPORTED)
        items = [pynvml.c_nvmlGpuInstancePlacement_t(p.start, p.size) for p in profile.placements]
        fill_array(placementsRef, countRef, items)
        return int(pynvml.NVML_SUCCESS)

    @nvml_api()
    def nvmlDeviceGetGpuInstanceRemainingCapacity(self, device: Any, profileId: int) -> int:  # noqa: N802, N803
        index, gpu = self._physical(device)
        self._require_mig_enabled(gpu)
        profile = self._gi_profile_by_id(index, profileId, missing=pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gi_remaining_capacity(self.model(index).profiles, gpu, profile)

    @nvml_api(mutates=True)
    def nvmlDeviceCreateGpuInstance(self, device: Any, profileId: int) -> Any:  # noqa: N802, N803
        """The driver picks the placement (see placement.choose_gi_placement for the rule)."""
        index, gpu = self._physical(device)
        self._require_mig_enabled(gpu)
        profile = self._gi_profile_by_id(index, profileId, missing=pynvml.NVML_ERROR_INVALID_ARGUMENT)
        chosen = choose_gi_placement(self.model(index).profiles, gpu, profile, rule=self.state.auto_placement)
        if chosen is None:
            raise nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        return self._add_gpu_instance(index, gpu, profile, chosen)

    @nvml_api(mutates=True)
    def nvmlDeviceCreateGpuInstanceWithPlacement(  # noqa: N802
        self,
        device: Any,
        profileId: int,  # noqa: N803
        placement: Any,
    ) -> Any:
        """An illegal placement is INVALID_ARGUMENT; a legal but occupied (or media-blocked) one
        INSUFFICIENT_RESOURCES [inferred: docs/nvml.md §12]."""
        index, gpu = self._physical(device)
        self._require_mig_enabled(gpu)
        profile = self._gi_profile_by_id(index, profileId, missing=pynvml.NVML_ERROR_INVALID_ARGUMENT)
        wanted = Placement(*read_placement(placement))
        if wanted not in profile.placements:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if wanted not in free_gi_placements(self.model(index).profiles, gpu, profile):
            raise nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        return self._add_gpu_instance(index, gpu, profile, wanted)

    def _add_gpu_instance(self, index: int, gpu: SimGpu, profile: GiProfile, placement: Placement) -> Any:
        table = self.model(index).profiles
        gi_id = gi_id_for(placement, memory_slices=table.memory_slices, id_map=self.state.gi_id_map)
        gi = SimGpuInstance(gi_id, profile.id, placement)
        gpu.gpu_instances.append(gi)
        gpu.gpu_instances.sort(key=lambda g: g.id)
        return self._gi_handle(index, gi)

    @nvml_api(mutates=True)
    def nvmlGpuInstanceDestroy(self, gpuInstance: Any) -> int:  # noqa: N802, N803
        """IN_USE while the GI has compute instances (and so processes) or a client holds it."""
        index, gi = self._gpu_instance(gpuInstance)
        if gi.compute_instances or gi.held_by_client:
            raise nvml_error(pynvml.NVML_ERROR_IN_USE)
        self._forget_gi(index, gi)
        self.state.gpus[index].gpu_instances.remove(gi)
        return int(pynvml.NVML_SUCCESS)

    @nvml_api()
    def nvmlDeviceGetGpuInstances(  # noqa: N802
        self,
        device: Any,
        profileId: int,  # noqa: N803
        gpuInstancesRef: Any,  # noqa: N803
        countRef: Any,  # noqa: N803
    ) -> int:
        """The GIs of one profile ID, in ascending GI ID order."""
        index, gpu = self._physical(device)
        self._require_mig_enabled(gpu)
        self._gi_profile_by_id(index, profileId, missing=pynvml.NVML_ERROR_INVALID_ARGUMENT)
        handles = [self._gi_handle(index, gi) for gi in gpu.gpu_instances if gi.profile_id == profileId]
        fill_handle_array(gpuInstancesRef, countRef, handles)
        return int(pynvml.NVML_SUCCESS)

    @nvml_api()
    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> Any:  # noqa: N802, N803
        index, gpu = self._physical(device)
        self._require_mig_enabled(gpu)
        gi = gpu.gpu_instance(gpuInstanceId)
        if gi is None:
            raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
        return self._gi_handle(index, gi)

    @nvml_api()
    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:  # noqa: N802, N803
        """`placement` is in memory slices (nvidia-smi -lgi's Start:Size)."""
        index, gi = self._gpu_instance(gpuInstance)
        info = pynvml.c_nvmlGpuInstanceInfo_t()
        info.device = self._device_handle(index)
        info.id = gi.id
        info.profileId = gi.profile_id
        info.placement.start, info.placement.size = gi.placement.start, gi.placement.size
        return info
