"""Compute instances inside a GI (docs/nvml.md §2, §8, §9)."""

from __future__ import annotations

import dataclasses
from ctypes import byref, c_uint
from typing import Any

import pynvml
import pytest

from migagent.catalog import model_by_key
from migagent.catalog.model import CI_PROFILE_ENUM_COUNT
from migagent.sim import FakeNvml
from tests.unit.sim.helpers import create_gi, gi_profile, nvml_code, started

A100 = "A100-40GB"


def gi_of(name: str, start: int, size: int, spec: str = A100) -> tuple[FakeNvml, Any]:
    fake = started(spec)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    return fake, create_gi(fake, device, gi_profile(spec, name).id, start, size)


def ci_placement(fake: FakeNvml, ci: Any) -> tuple[int, int]:
    info = fake.nvmlComputeInstanceGetInfo(ci)
    return info.placement.start, info.placement.size


def test_ci_profile_info_reports_slices_instances_and_the_gis_shared_engines() -> None:
    fake, gi = gi_of("3g.20gb", 0, 4)
    partial = fake.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 0)
    assert isinstance(partial, pynvml.c_nvmlComputeInstanceProfileInfo_v2_t)
    assert partial.version == pynvml.nvmlComputeInstanceProfileInfo_v2
    assert (partial.id, partial.sliceCount, partial.instanceCount, partial.multiprocessorCount) == (0, 1, 3, 14)
    assert (partial.sharedCopyEngineCount, partial.sharedDecoderCount) == (3, 2)
    assert partial.name == "MIG 1c.3g.20gb"
    full = fake.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, 0)
    assert (full.id, full.name) == (2, "MIG 3g.20gb")
    v1 = fake.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 2, 0, version=1)
    assert type(v1) is pynvml.c_nvmlComputeInstanceProfileInfo_t


def test_the_ci_of_a_plus_me_gi_is_named_without_plus_me() -> None:
    fake, gi = gi_of("1g.5gb+me", 0, 1)
    assert fake.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 0, 0).name == "MIG 1g.5gb"


def test_a_ci_profile_the_gi_does_not_offer_is_not_supported() -> None:
    fake, gi = gi_of("4g.20gb", 0, 4)
    assert nvml_code(lambda: fake.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 2, 0)) == (
        pynvml.NVML_ERROR_NOT_SUPPORTED
    )


@pytest.mark.parametrize(("profile", "engine_profile"), [(CI_PROFILE_ENUM_COUNT, 0), (0, 1)])
def test_a_ci_profile_or_engine_profile_out_of_range_is_invalid_argument(profile: int, engine_profile: int) -> None:
    fake, gi = gi_of("7g.40gb", 0, 8)
    assert nvml_code(lambda: fake.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, profile, engine_profile)) == (
        pynvml.NVML_ERROR_INVALID_ARGUMENT
    )


def test_ci_capacity_is_counted_per_gi_as_captured() -> None:
    fake, gi = gi_of("2g.10gb", 0, 2)
    assert fake.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, 0) == 2
    assert fake.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, 1) == 1
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    assert fake.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, 0) == 1
    assert fake.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, 1) == 0
    other = create_gi(fake, fake.nvmlDeviceGetHandleByIndex(0), 14, 2, 2)
    assert fake.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(other, 0) == 2


def test_ci_ids_are_the_lowest_free_index_from_zero_within_the_gi() -> None:
    fake, gi = gi_of("7g.40gb", 0, 8)
    cis = [fake.nvmlGpuInstanceCreateComputeInstance(gi, 0) for _ in range(3)]
    assert [fake.nvmlComputeInstanceGetInfo(ci).id for ci in cis] == [0, 1, 2]
    fake.nvmlComputeInstanceDestroy(cis[1])
    assert fake.nvmlComputeInstanceGetInfo(fake.nvmlGpuInstanceCreateComputeInstance(gi, 0)).id == 1


def test_ci_ids_restart_from_zero_in_every_gi() -> None:
    fake, first = gi_of("3g.20gb", 0, 4)
    second = create_gi(fake, fake.nvmlDeviceGetHandleByIndex(0), 9, 4, 4)
    fake.nvmlGpuInstanceCreateComputeInstance(first, 0)
    assert fake.nvmlComputeInstanceGetInfo(fake.nvmlGpuInstanceCreateComputeInstance(second, 0)).id == 0


def test_automatic_ci_placement_takes_the_lowest_free_compute_slice_inferred() -> None:
    fake, gi = gi_of("7g.40gb", 0, 8)
    placement = pynvml.c_nvmlComputeInstancePlacement_t(0, 1)
    fake.nvmlGpuInstanceCreateComputeInstanceWithPlacement(gi, 0, byref(placement))
    ci = fake.nvmlGpuInstanceCreateComputeInstance(gi, 1)
    assert ci_placement(fake, ci) == (2, 2)
    assert ci_placement(fake, fake.nvmlGpuInstanceCreateComputeInstance(gi, 0)) == (1, 1)


def test_ci_possible_placements_come_from_the_catalog_in_compute_slices() -> None:
    fake, gi = gi_of("7g.40gb", 0, 8)
    count = c_uint(0)
    fake.nvmlGpuInstanceGetComputeInstancePossiblePlacements(gi, 2, None, byref(count))
    array = (pynvml.c_nvmlComputeInstancePlacement_t * count.value)()
    fake.nvmlGpuInstanceGetComputeInstancePossiblePlacements(gi, 2, array, byref(count))
    assert [(p.start, p.size) for p in array] == [(0, 3), (4, 3)]


def test_create_ci_with_an_illegal_placement_is_invalid_and_an_occupied_one_insufficient() -> None:
    fake, gi = gi_of("3g.20gb", 0, 4)

    def create(profile: int, start: int, size: int) -> Any:
        placement = pynvml.c_nvmlComputeInstancePlacement_t(start, size)
        return fake.nvmlGpuInstanceCreateComputeInstanceWithPlacement(gi, profile, byref(placement))

    assert nvml_code(lambda: create(1, 1, 2)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    create(0, 1, 1)
    assert nvml_code(lambda: create(1, 0, 2)) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    assert nvml_code(lambda: create(2, 0, 3)) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES


def test_ci_capacity_is_capped_by_the_profiles_instance_count() -> None:
    base = model_by_key(A100)
    seven = base.profiles.gi_profile(0)
    assert seven is not None
    capped = tuple(dataclasses.replace(ci, max_instances=2) if ci.id == 0 else ci for ci in seven.ci_profiles)
    profiles = tuple(
        dataclasses.replace(p, ci_profiles=capped) if p.id == 0 else p for p in base.profiles.gi_profiles
    )
    table = dataclasses.replace(base.profiles, gi_profiles=profiles)
    model = dataclasses.replace(base, key="TEST-CAPPED", profiles=table)
    fake = FakeNvml.from_models([model], mig_enabled=True)
    fake.nvmlInit()
    gi = create_gi(fake, fake.nvmlDeviceGetHandleByIndex(0), 0, 0, 8)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    assert fake.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, 0) == 1
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    assert fake.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, 0) == 0
    assert nvml_code(lambda: fake.nvmlGpuInstanceCreateComputeInstance(gi, 0)) == (
        pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    )


def test_a_full_gi_has_no_room_for_another_ci() -> None:
    fake, gi = gi_of("1g.5gb", 0, 1)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    assert nvml_code(lambda: fake.nvmlGpuInstanceCreateComputeInstance(gi, 0)) == (
        pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    )
    # nvml.h: a CI profile the GI does not offer is NOT_SUPPORTED.
    assert nvml_code(lambda: fake.nvmlGpuInstanceCreateComputeInstance(gi, 4)) == pynvml.NVML_ERROR_NOT_SUPPORTED


def test_compute_instances_are_listed_per_profile_and_found_by_id() -> None:
    fake, gi = gi_of("4g.20gb", 0, 4)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 1)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    count = c_uint(0)
    array = (pynvml.c_nvmlComputeInstance_t * 4)()
    fake.nvmlGpuInstanceGetComputeInstances(gi, 0, array, byref(count))
    assert count.value == 1
    assert fake.nvmlComputeInstanceGetInfo(array[0]).id == 1
    assert fake.nvmlComputeInstanceGetInfo(fake.nvmlGpuInstanceGetComputeInstanceById(gi, 0)).profileId == 1
    assert nvml_code(lambda: fake.nvmlGpuInstanceGetComputeInstanceById(gi, 5)) == pynvml.NVML_ERROR_NOT_FOUND


def test_ci_info_names_the_parent_gpu_and_its_gi() -> None:
    fake, gi = gi_of("3g.20gb", 4, 4)
    info = fake.nvmlComputeInstanceGetInfo(fake.nvmlGpuInstanceCreateComputeInstance(gi, 2))
    assert fake.nvmlDeviceGetUUID(info.device) == fake.state.gpus[0].uuid
    assert fake.nvmlDeviceIsMigDeviceHandle(info.device).value == 0
    assert fake.nvmlGpuInstanceGetInfo(info.gpuInstance).id == 2
    assert (info.profileId, info.placement.start, info.placement.size) == (2, 0, 3)


def test_destroying_a_ci_with_processes_raises_in_use_until_they_exit() -> None:
    fake, gi = gi_of("7g.40gb", 0, 8)
    ci = fake.nvmlGpuInstanceCreateComputeInstance(gi, 4)
    mig_uuid = fake.state.gpus[0].gpu_instances[0].compute_instances[0].uuid
    fake.sim_attach_process(mig_uuid, pid=1234)
    with pytest.raises(pynvml.NVMLError_InUse):
        fake.nvmlComputeInstanceDestroy(ci)
    with pytest.raises(pynvml.NVMLError_InUse):
        fake.nvmlGpuInstanceDestroy(gi)
    fake.sim_detach_process(1234)
    fake.nvmlComputeInstanceDestroy(ci)
    assert nvml_code(lambda: fake.nvmlComputeInstanceGetInfo(ci)) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_the_hopper_double_memory_1g_gi_offers_the_rev1_full_ci() -> None:
    fake, gi = gi_of("1g.20gb", 0, 2, spec="H100-80GB-SXM")
    info = fake.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1, 0)
    assert (info.id, info.name) == (7, "MIG 1g.20gb")


def test_a_destroyed_ci_handle_stays_stale_when_a_ci_with_the_same_id_is_created() -> None:
    fake, gi = gi_of("7g.40gb", 0, 8)
    old = fake.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    fake.nvmlComputeInstanceDestroy(old)
    new = fake.nvmlGpuInstanceCreateComputeInstance(gi, 4)
    assert fake.nvmlComputeInstanceGetInfo(new).id == 0
    assert nvml_code(lambda: fake.nvmlComputeInstanceGetInfo(old)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert nvml_code(lambda: fake.nvmlComputeInstanceDestroy(old)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
