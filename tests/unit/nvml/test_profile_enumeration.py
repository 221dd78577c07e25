"""GI and CI profiles are enumerated until NVML answers INVALID_ARGUMENT (nvml.h), not up to the
installed pynvml's NVML_*_PROFILE_COUNT: a newer driver's profiles, and instances of them, stay visible."""

from __future__ import annotations

from ctypes import byref

import pynvml
import pytest

from migagent.catalog import GpuModel, Placement, model_by_key
from migagent.errors import PermanentError
from migagent.nvml.enumerate import ENUM_LIMIT
from migagent.sim import FakeNvml
from migagent.sim.unlisted import unlisted_ci_profile_id, unlisted_enum, with_unlisted_gi_profile
from tests.unit.nvml.conftest import DriverFactory


def _newer_driver_node() -> tuple[FakeNvml, GpuModel]:
    model = with_unlisted_gi_profile(model_by_key("A100-80GB"))
    return FakeNvml.from_models([model], mig_enabled=True), model


def test_the_unlisted_profile_lies_past_the_installed_pynvml_constants() -> None:
    _fake, model = _newer_driver_node()
    unlisted = model.profiles.gi_profiles[-1]
    assert unlisted.enum_value == unlisted_enum(model_by_key("A100-80GB")) > pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT
    assert unlisted_ci_profile_id() > pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT


def test_a_gi_of_a_profile_past_pynvml_profile_count_is_observed_with_its_slices_taken(
    open_driver: DriverFactory,
) -> None:
    fake, model = _newer_driver_node()
    unlisted = model.profiles.gi_profiles[-1]
    driver = open_driver(fake)
    gi_id = driver.create_gpu_instance(0, profile_id=unlisted.id, placement=Placement(4, 4))
    driver.create_compute_instance(0, gi_id=gi_id, profile_id=0)

    gpu = driver.observe().gpu(0)

    assert [(gi.profile_id, gi.placement) for gi in gpu.gpu_instances] == [(unlisted.id, Placement(4, 4))]
    assert gpu.profiles is not None
    assert gpu.profiles.gi_profile(unlisted.id) is not None
    assert [ci.profile_id for ci in gpu.gpu_instances[0].compute_instances] == [0]


def test_a_ci_of_a_profile_past_pynvml_compute_profile_count_is_observed(open_driver: DriverFactory) -> None:
    fake, model = _newer_driver_node()
    unlisted = model.profiles.gi_profiles[-1]
    driver = open_driver(fake)
    gi_id = driver.create_gpu_instance(0, profile_id=unlisted.id, placement=Placement(0, 4))
    gi = fake.nvmlDeviceGetGpuInstanceById(fake.nvmlDeviceGetHandleByIndex(0), gi_id)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, unlisted_ci_profile_id())

    (observed,) = driver.observe().gpu(0).gpu_instances

    assert [ci.profile_id for ci in observed.compute_instances] == [unlisted_ci_profile_id()]


def test_enumeration_skips_not_supported_enums_between_the_known_and_the_unlisted_profiles(
    open_driver: DriverFactory,
) -> None:
    fake, model = _newer_driver_node()
    last = model.profiles.gi_profiles[-1].enum_value
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        fake.nvmlDeviceGetGpuInstanceProfileInfo(device, last - 1)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        fake.nvmlDeviceGetGpuInstanceProfileInfo(device, last + 1)
    fake.nvmlShutdown()

    table = open_driver(fake).profile_table(0)

    assert {p.enum_value for p in table.gi_profiles} == {p.enum_value for p in model.profiles.gi_profiles}


def test_an_enumeration_error_other_than_the_two_answers_is_raised_naming_the_enum(
    open_driver: DriverFactory,
) -> None:
    fake, _model = _newer_driver_node()
    fake.sim_inject_fault("nvmlDeviceGetGpuInstanceProfileInfo", pynvml.NVML_ERROR_NO_PERMISSION)

    with pytest.raises(PermanentError, match=r"nvmlDeviceGetGpuInstanceProfileInfo\(enum 0\).*NO_PERMISSION"):
        open_driver(fake).observe()


def test_a_library_that_never_answers_invalid_argument_is_refused_rather_than_looped_on(
    open_driver: DriverFactory,
) -> None:
    fake, _model = _newer_driver_node()
    fake.sim_inject_fault("nvmlDeviceGetGpuInstanceProfileInfo", pynvml.NVML_ERROR_NOT_SUPPORTED, times=None)

    with pytest.raises(PermanentError, match=f"every enum from 0 to {ENUM_LIMIT - 1}"):
        open_driver(fake).observe()


def test_creating_a_ci_of_a_profile_the_gi_does_not_offer_is_not_supported_per_nvml_h() -> None:
    fake = FakeNvml.from_spec("A100-40GB", mig_enabled=True)
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    placement = pynvml.c_nvmlGpuInstancePlacement_t(6, 1)
    gi = fake.nvmlDeviceCreateGpuInstanceWithPlacement(device, 19, byref(placement))  # 1g.5gb: only 1c CIs

    for call in (
        lambda: fake.nvmlGpuInstanceCreateComputeInstance(gi, 2),
        lambda: fake.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, 2),
    ):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            call()
