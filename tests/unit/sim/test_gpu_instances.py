"""GPU-instance profiles, placements and lifecycle (docs/nvml.md §2, §3, §5, §9)."""

from __future__ import annotations

from ctypes import byref, c_uint, pointer

import pynvml
import pytest

from migagent.catalog import model_by_key
from migagent.catalog.model import GI_PROFILE_ENUM_COUNT
from migagent.layout.profile import gi_profile_name
from migagent.sim import FakeNvml
from tests.unit.sim.helpers import create_gi, gi_placement, gi_profile, gpu_instances, nvml_code, started

A100 = "A100-40GB"


def test_profile_info_by_enum_returns_the_catalog_profile_with_its_own_id() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    info = fake.nvmlDeviceGetGpuInstanceProfileInfo(device, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2)
    expected = gi_profile(A100, "1g.10gb")
    assert isinstance(info, pynvml.c_nvmlGpuInstanceProfileInfo_v2_t)
    assert info.version == pynvml.nvmlGpuInstanceProfileInfo_v2
    assert info.id == expected.id == 15 != pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2
    assert info.name == "MIG 1g.10gb"
    assert (info.sliceCount, info.instanceCount, info.memorySizeMB) == (1, 4, expected.memory_mb)
    assert (info.multiprocessorCount, info.copyEngineCount, info.decoderCount) == (
        expected.sms, expected.engines.copy, expected.engines.decoders
    )
    assert (info.encoderCount, info.jpegCount, info.ofaCount) == (
        expected.engines.encoders, expected.engines.jpeg, expected.engines.ofa
    )
    assert info.isP2pSupported == 0


def test_every_catalog_profile_is_reported_under_its_mig_parted_name() -> None:
    for key in ("A100-40GB", "A30-24GB", "H100-80GB-SXM", "B200-180GB"):
        fake = started(key)
        device = fake.nvmlDeviceGetHandleByIndex(0)
        model = model_by_key(key)
        for profile in model.profiles.gi_profiles:
            info = fake.nvmlDeviceGetGpuInstanceProfileInfo(device, profile.enum_value)
            assert info.name == f"MIG {gi_profile_name(profile, model.profiles)}"


def test_profile_info_version_1_returns_the_plain_structure() -> None:
    fake = started(A100)
    info = fake.nvmlDeviceGetGpuInstanceProfileInfo(fake.nvmlDeviceGetHandleByIndex(0), 0, version=1)
    assert type(info) is pynvml.c_nvmlGpuInstanceProfileInfo_t
    assert info.id == 19


def test_an_enum_the_model_lacks_is_not_supported() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    call = lambda: fake.nvmlDeviceGetGpuInstanceProfileInfo(device, pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1)  # noqa: E731
    assert nvml_code(call) == pynvml.NVML_ERROR_NOT_SUPPORTED


@pytest.mark.parametrize("enum", [GI_PROFILE_ENUM_COUNT, 99, -1])
def test_an_enum_past_the_profile_count_is_invalid_argument(enum: int) -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert nvml_code(lambda: fake.nvmlDeviceGetGpuInstanceProfileInfo(device, enum)) == (
        pynvml.NVML_ERROR_INVALID_ARGUMENT
    )


def test_profile_info_by_id_takes_the_profile_id() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.nvmlDeviceGetGpuInstanceProfileInfoById(device, 9).name == "MIG 3g.20gb"
    assert nvml_code(lambda: fake.nvmlDeviceGetGpuInstanceProfileInfoById(device, 2)) == (
        pynvml.NVML_ERROR_NOT_SUPPORTED
    )


def test_profile_queries_are_not_supported_while_mig_is_disabled() -> None:
    fake = FakeNvml.from_spec(A100)
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert nvml_code(lambda: fake.nvmlDeviceGetGpuInstanceProfileInfo(device, 0)) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert nvml_code(lambda: fake.nvmlDeviceGetGpuInstanceProfileInfoById(device, 19)) == (
        pynvml.NVML_ERROR_NOT_SUPPORTED
    )


def test_profile_queries_work_with_mig_disabled_when_the_driver_allows_it() -> None:
    fake = FakeNvml.from_spec(A100, profiles_queryable_when_disabled=True)
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.nvmlDeviceGetGpuInstanceProfileInfo(device, 0).id == 19
    assert fake.nvmlDeviceGetGpuInstanceProfileInfoById(device, 0).name == "MIG 7g.40gb"


def test_possible_placements_lists_every_legal_placement_even_with_mig_disabled() -> None:
    fake = FakeNvml.from_spec(A100)
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    count = c_uint(0)
    fake.nvmlDeviceGetGpuInstancePossiblePlacements(device, 15, None, byref(count))
    assert count.value == 4
    array = (pynvml.c_nvmlGpuInstancePlacement_t * count.value)()
    assert fake.nvmlDeviceGetGpuInstancePossiblePlacements(device, 15, array, byref(count)) == pynvml.NVML_SUCCESS
    assert [(p.start, p.size) for p in array] == [(0, 2), (2, 2), (4, 2), (6, 2)]


def test_possible_placements_ignore_occupancy() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    create_gi(fake, device, 9, 0, 4)
    count = c_uint(0)
    fake.nvmlDeviceGetGpuInstancePossiblePlacements(device, 9, None, byref(count))
    assert count.value == 2


def test_a_too_small_placement_array_is_insufficient_size_and_reports_the_needed_count() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    count = c_uint(0)
    array = (pynvml.c_nvmlGpuInstancePlacement_t * 3)()
    call = lambda: fake.nvmlDeviceGetGpuInstancePossiblePlacements(device, 19, array, byref(count))  # noqa: E731
    assert nvml_code(call) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    assert count.value == 7


def test_a_bare_pointer_array_uses_the_given_count_as_its_capacity() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    array = (pynvml.c_nvmlGpuInstancePlacement_t * 7)()
    first = pointer(array[0])
    small = c_uint(2)
    call = lambda: fake.nvmlDeviceGetGpuInstancePossiblePlacements(device, 19, first, byref(small))  # noqa: E731
    assert nvml_code(call) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE


def test_two_3g_instances_fit_and_a_third_is_insufficient_resources() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    first = fake.nvmlDeviceCreateGpuInstance(device, 9)
    second = fake.nvmlDeviceCreateGpuInstance(device, 9)
    assert [gi_placement(fake, first), gi_placement(fake, second)] == [(4, 4), (0, 4)]
    assert nvml_code(lambda: fake.nvmlDeviceCreateGpuInstance(device, 9)) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES


def test_creation_order_matters_small_first_can_leave_no_room_for_a_3g() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    for profile_id in (19, 19, 14):
        fake.nvmlDeviceCreateGpuInstance(device, profile_id)
    assert nvml_code(lambda: fake.nvmlDeviceCreateGpuInstance(device, 9)) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    reverse = started(A100)
    device = reverse.nvmlDeviceGetHandleByIndex(0)
    for profile_id in (9, 14, 19, 19):
        reverse.nvmlDeviceCreateGpuInstance(device, profile_id)
    assert len(reverse.state.gpus[0].gpu_instances) == 4


@pytest.mark.parametrize("wrap", ["byref", "pointer"])
def test_create_with_placement_accepts_the_structure_by_reference_or_pointer(wrap: str) -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    placement = pynvml.c_nvmlGpuInstancePlacement_t(2, 2)
    argument = {"byref": byref(placement), "pointer": pointer(placement)}[wrap]
    gi = fake.nvmlDeviceCreateGpuInstanceWithPlacement(device, 14, argument)
    assert gi_placement(fake, gi) == (2, 2)


def test_a_placement_passed_by_value_is_refused_as_the_c_library_refuses_it() -> None:
    """pynvml forwards `placement` untouched to a `const nvmlGpuInstancePlacement_t*` parameter: by value,
    ctypes would hand the C library the structure's bytes where a pointer is expected."""
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    placement = pynvml.c_nvmlGpuInstancePlacement_t(2, 2)
    code = nvml_code(lambda: fake.nvmlDeviceCreateGpuInstanceWithPlacement(device, 14, placement))
    assert code == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert fake.state.gpus[0].gpu_instances == []


def test_a_null_or_short_instance_array_is_refused_and_a_short_one_is_told_the_count() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    for start in (0, 1):
        create_gi(fake, device, 19, start, 1)
    count = c_uint(0)
    null = nvml_code(lambda: fake.nvmlDeviceGetGpuInstances(device, 19, None, byref(count)))
    assert null == pynvml.NVML_ERROR_INVALID_ARGUMENT
    short = (pynvml.c_nvmlGpuInstance_t * 1)()
    assert nvml_code(lambda: fake.nvmlDeviceGetGpuInstances(device, 19, short, byref(count))) == (
        pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    )
    assert count.value == 2
    by_value = nvml_code(lambda: fake.nvmlDeviceGetGpuInstances(device, 19, short, c_uint(8)))
    assert by_value == pynvml.NVML_ERROR_INVALID_ARGUMENT


@pytest.mark.parametrize(("start", "size"), [(1, 2), (6, 2), (2, 4), (0, 1)])
def test_an_illegal_placement_is_invalid_argument(start: int, size: int) -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert nvml_code(lambda: create_gi(fake, device, 14, start, size)) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_an_occupied_legal_placement_is_insufficient_resources_uncertain() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    create_gi(fake, device, 19, 3, 1)
    assert nvml_code(lambda: create_gi(fake, device, 14, 2, 2)) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    assert nvml_code(lambda: create_gi(fake, device, 19, 3, 1)) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES


def test_creating_an_instance_needs_mig_enabled_and_a_known_profile_id() -> None:
    fake = FakeNvml.from_spec(A100)
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert nvml_code(lambda: fake.nvmlDeviceCreateGpuInstance(device, 19)) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert nvml_code(lambda: create_gi(fake, device, 19, 0, 1)) == pynvml.NVML_ERROR_NOT_SUPPORTED
    enabled = started(A100)
    device = enabled.nvmlDeviceGetHandleByIndex(0)
    assert nvml_code(lambda: enabled.nvmlDeviceCreateGpuInstance(device, 3)) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_instances_are_listed_per_profile_id_in_gi_id_order() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    for start in (5, 0, 3):
        create_gi(fake, device, 19, start, 1)
    create_gi(fake, device, 15, 6, 2)
    ids = [fake.nvmlGpuInstanceGetInfo(gi).id for gi in gpu_instances(fake, device, 19)]
    assert ids == [7, 10, 12]
    assert [fake.nvmlGpuInstanceGetInfo(gi).id for gi in gpu_instances(fake, device, 15)] == [6]
    assert gpu_instances(fake, device, 9) == []
    assert all(isinstance(gi, pynvml.c_nvmlGpuInstance_t) for gi in gpu_instances(fake, device, 19))


def test_listing_instances_needs_mig_enabled_and_a_known_profile_id() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    count = c_uint(0)
    assert nvml_code(lambda: fake.nvmlDeviceGetGpuInstances(device, 3, None, byref(count))) == (
        pynvml.NVML_ERROR_INVALID_ARGUMENT
    )
    disabled = FakeNvml.from_spec(A100)
    disabled.nvmlInit()
    device = disabled.nvmlDeviceGetHandleByIndex(0)
    assert nvml_code(lambda: disabled.nvmlDeviceGetGpuInstances(device, 19, None, byref(count))) == (
        pynvml.NVML_ERROR_NOT_SUPPORTED
    )


def test_an_instance_is_found_by_id_and_a_missing_id_is_not_found() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    create_gi(fake, device, 9, 4, 4)
    info = fake.nvmlGpuInstanceGetInfo(fake.nvmlDeviceGetGpuInstanceById(device, 2))
    assert (info.id, info.profileId, info.placement.start, info.placement.size) == (2, 9, 4, 4)
    assert fake.nvmlDeviceGetUUID(info.device) == fake.state.gpus[0].uuid
    assert nvml_code(lambda: fake.nvmlDeviceGetGpuInstanceById(device, 1)) == pynvml.NVML_ERROR_NOT_FOUND


def test_destroying_a_gi_with_compute_instances_raises_in_use_until_they_are_destroyed() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    gi = create_gi(fake, device, 9, 0, 4)
    ci = fake.nvmlGpuInstanceCreateComputeInstance(gi, 2)
    with pytest.raises(pynvml.NVMLError_InUse):
        fake.nvmlGpuInstanceDestroy(gi)
    fake.nvmlComputeInstanceDestroy(ci)
    assert fake.nvmlGpuInstanceDestroy(gi) == pynvml.NVML_SUCCESS
    assert fake.state.gpus[0].gpu_instances == []


def test_destroying_a_gi_a_client_still_holds_raises_in_use() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    gi = create_gi(fake, device, 9, 0, 4)
    fake.sim_set_gpu_instance_held(0, 1, True)
    with pytest.raises(pynvml.NVMLError_InUse):
        fake.nvmlGpuInstanceDestroy(gi)
    fake.sim_set_gpu_instance_held(0, 1, False)
    fake.nvmlGpuInstanceDestroy(gi)


def test_a_destroyed_gi_handle_is_stale() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    gi = create_gi(fake, device, 9, 0, 4)
    fake.nvmlGpuInstanceDestroy(gi)
    assert nvml_code(lambda: fake.nvmlGpuInstanceGetInfo(gi)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert nvml_code(lambda: fake.nvmlGpuInstanceDestroy(gi)) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_a_destroyed_gi_handle_stays_stale_when_the_same_gi_is_recreated() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    old = create_gi(fake, device, 9, 0, 4)
    fake.nvmlGpuInstanceDestroy(old)
    new = create_gi(fake, device, 9, 0, 4)
    assert fake.nvmlGpuInstanceGetInfo(new).id == 1
    assert nvml_code(lambda: fake.nvmlGpuInstanceGetInfo(old)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
