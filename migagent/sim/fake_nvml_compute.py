"""FakeNvml's compute-instance surface. CI profile IDs equal their enum values (docs/nvml.md §2);
CI placements are compute slices relative to the GI. Each CI is one MIG device."""

from __future__ import annotations

from typing import Any

import pynvml

from migagent.catalog import CiProfile, GiProfile, Placement
from migagent.catalog.model import CI_PROFILE_ENUM_COUNT
from migagent.sim.core import FakeCore, ci_profile_display_name, nvml_api
from migagent.sim.handles import fill_array, fill_handle_array, nvml_error, read_placement
from migagent.sim.placement import (
    choose_ci_placement,
    ci_remaining_capacity,
    free_ci_placements,
    lowest_free_id,
)
from migagent.sim.state import SimComputeInstance, SimGpuInstance, mig_uuid


class ComputeInstanceApi(FakeCore):
    def _ci_profile(self, gpu_index: int, gi: SimGpuInstance, profile_id: int, *, missing: int) -> CiProfile:
        gi_profile = self._gi_profile(gpu_index, gi)
        profile = gi_profile.ci_profile(profile_id)
        if profile is None or not self._ci_profile_offered(gi_profile, profile):
            raise nvml_error(missing)
        return profile

    def _ci_profile_offered(self, gi_profile: GiProfile, profile: CiProfile) -> bool:
        """A CI profile the size of the GI's default but not it (1_SLICE beside 1_SLICE_REV1) is offered
        only as the node's `one_slice_ci_beside_rev1` says (an uncertain fact, see SimNodeState)."""
        default = gi_profile.default_ci
        duplicate = profile.id != default.id and profile.slices == default.slices
        return not duplicate or self.state.one_slice_ci_beside_rev1

    @nvml_api()
    def nvmlGpuInstanceGetComputeInstanceProfileInfo(  # noqa: N802
        self,
        device: Any,
        profile: int,
        engProfile: int,  # noqa: N803
        version: int = 2,
    ) -> Any:
        """`device` is a GI handle (pynvml's parameter name). Shared engines are the GI's. Past the
        driver's last CI enum INVALID_ARGUMENT; a CI profile this GI does not offer NOT_SUPPORTED."""
        index, gi = self._gpu_instance(device)
        known = max(CI_PROFILE_ENUM_COUNT, *(ci.id + 1 for ci in self._gi_profile(index, gi).ci_profiles))
        if not 0 <= profile < known or engProfile != pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        ci_profile = self._ci_profile(index, gi, profile, missing=pynvml.NVML_ERROR_NOT_SUPPORTED)
        gi_profile = self._gi_profile(index, gi)
        if version == 2:
            info = pynvml.c_nvmlComputeInstanceProfileInfo_v2_t()
            info.name = f"MIG {ci_profile_display_name(self.model(index), gi_profile, ci_profile.id)}"
        elif version == 1:
            info = pynvml.c_nvmlComputeInstanceProfileInfo_t()
        else:  # what pynvml itself raises for an unknown version
            raise nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        info.id = ci_profile.id
        info.sliceCount = ci_profile.slices
        info.instanceCount = ci_profile.max_instances
        info.multiprocessorCount = ci_profile.sms
        info.sharedCopyEngineCount = gi_profile.engines.copy
        info.sharedDecoderCount = gi_profile.engines.decoders
        info.sharedEncoderCount = gi_profile.engines.encoders
        info.sharedJpegCount = gi_profile.engines.jpeg
        info.sharedOfaCount = gi_profile.engines.ofa
        return info

    @nvml_api()
    def nvmlGpuInstanceGetComputeInstanceRemainingCapacity(  # noqa: N802
        self,
        gpuInstance: Any,  # noqa: N803
        profileId: int,  # noqa: N803
    ) -> int:
        index, gi = self._gpu_instance(gpuInstance)
        profile = self._ci_profile(index, gi, profileId, missing=pynvml.NVML_ERROR_NOT_SUPPORTED)
        return ci_remaining_capacity(gi, profile)

    @nvml_api()
    def nvmlGpuInstanceGetComputeInstancePossiblePlacements(  # noqa: N802
        self,
        gpuInstance: Any,  # noqa: N803
        profileId: int,  # noqa: N803
        placementsRef: Any,  # noqa: N803
        countRef: Any,  # noqa: N803
    ) -> int:
        index, gi = self._gpu_instance(gpuInstance)
        profile = self._ci_profile(index, gi, profileId, missing=pynvml.NVML_ERROR_NOT_SUPPORTED)
        items = [pynvml.c_nvmlComputeInstancePlacement_t(p.start, p.size) for p in profile.placements]
        fill_array(placementsRef, countRef, items)
        return int(pynvml.NVML_SUCCESS)

    @nvml_api(mutates=True)
    def nvmlGpuInstanceCreateComputeInstance(self, gpuInstance: Any, profileId: int) -> Any:  # noqa: N802, N803
        """Takes the lowest free legal placement [inf]."""
        index, gi = self._gpu_instance(gpuInstance)
        profile = self._ci_profile(index, gi, profileId, missing=pynvml.NVML_ERROR_NOT_SUPPORTED)
        chosen = choose_ci_placement(gi, profile)
        if chosen is None:
            raise nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        return self._add_compute_instance(index, gi, profile, chosen)

    @nvml_api(mutates=True)
    def nvmlGpuInstanceCreateComputeInstanceWithPlacement(  # noqa: N802
        self,
        gpuInstance: Any,  # noqa: N803
        profileId: int,  # noqa: N803
        placement: Any,
    ) -> Any:
        index, gi = self._gpu_instance(gpuInstance)
        profile = self._ci_profile(index, gi, profileId, missing=pynvml.NVML_ERROR_NOT_SUPPORTED)
        wanted = Placement(*read_placement(placement))
        if wanted not in profile.placements:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if wanted not in free_ci_placements(gi, profile):
            raise nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        return self._add_compute_instance(index, gi, profile, wanted)

    def _add_compute_instance(self, index: int, gi: SimGpuInstance, profile: CiProfile, placement: Placement) -> Any:
        gpu = self.state.gpus[index]
        ci = SimComputeInstance(
            id=lowest_free_id(ci.id for ci in gi.compute_instances),
            profile_id=profile.id,
            placement=placement,
            uuid=mig_uuid(gpu.uuid, gpu.mig_uuid_serial),
        )
        gpu.mig_uuid_serial += 1
        gi.compute_instances.append(ci)
        gi.compute_instances.sort(key=lambda c: c.id)
        return self._ci_handle(index, gi, ci)

    @nvml_api(mutates=True)
    def nvmlComputeInstanceDestroy(self, computeInstance: Any) -> int:  # noqa: N802, N803
        """IN_USE while processes run on it; its CI and MIG-device handles then go stale."""
        index, gi, ci = self._compute_instance(computeInstance)
        if ci.processes:
            raise nvml_error(pynvml.NVML_ERROR_IN_USE)
        self._forget_ci(index, gi, ci)
        gi.compute_instances.remove(ci)
        return int(pynvml.NVML_SUCCESS)

    @nvml_api()
    def nvmlGpuInstanceGetComputeInstances(  # noqa: N802
        self,
        gpuInstance: Any,  # noqa: N803
        profileId: int,  # noqa: N803
        computeInstancesRef: Any,  # noqa: N803
        countRef: Any,  # noqa: N803
    ) -> int:
        index, gi = self._gpu_instance(gpuInstance)
        self._ci_profile(index, gi, profileId, missing=pynvml.NVML_ERROR_NOT_SUPPORTED)
        handles = [self._ci_handle(index, gi, ci) for ci in gi.compute_instances if ci.profile_id == profileId]
        fill_handle_array(computeInstancesRef, countRef, handles)
        return int(pynvml.NVML_SUCCESS)

    @nvml_api()
    def nvmlGpuInstanceGetComputeInstanceById(self, gpuInstance: Any, computeInstanceId: int) -> Any:  # noqa: N802, N803
        index, gi = self._gpu_instance(gpuInstance)
        ci = gi.compute_instance(computeInstanceId)
        if ci is None:
            raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
        return self._ci_handle(index, gi, ci)

    @nvml_api()
    def nvmlComputeInstanceGetInfo(self, computeInstance: Any) -> Any:  # noqa: N802, N803
        """`device` is the parent GPU's handle, not the MIG device's (docs/nvml.md §3)."""
        index, gi, ci = self._compute_instance(computeInstance)
        info = pynvml.c_nvmlComputeInstanceInfo_t()
        info.device = self._device_handle(index)
        info.gpuInstance = self._gi_handle(index, gi)
        info.id = ci.id
        info.profileId = ci.profile_id
        info.placement.start, info.placement.size = ci.placement.start, ci.placement.size
        return info
