"""GI and CI profiles are enumerated to max(pynvml's NVML_*_PROFILE_COUNT, NVML's first INVALID_ARGUMENT
(nvml.h)): a newer driver's profiles, and instances of them, stay visible; NOT_SUPPORTED is skipped."""

from __future__ import annotations

from ctypes import byref
from typing import Any

import pynvml
import pytest
from structlog.testing import capture_logs

from migagent.catalog import GpuModel, Placement, model_by_key
from migagent.clock import FakeClock
from migagent.errors import NotSupportedError, PermanentError
from migagent.layout.parse import parse_layout
from migagent.layout.resolve import identity_of, resolve_config
from migagent.nvml import GpuDriver
from migagent.reconcile.bootid import FixedBootId
from migagent.reconcile.journal import MemoryJournal, desired_node_hash
from migagent.reconcile.machine import ApplyEngine
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner
from migagent_sim.doubles.unlisted import unlisted_ci_profile_id, unlisted_enum, with_unlisted_gi_profile
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


def test_a_library_that_never_answers_invalid_argument_is_asked_to_the_guard_and_not_looped_on(
    open_driver: DriverFactory,
) -> None:
    fake, _model = _newer_driver_node()
    fake.sim_inject_fault("nvmlDeviceGetGpuInstanceProfileInfo", pynvml.NVML_ERROR_NOT_SUPPORTED, times=None)

    with pytest.raises(NotSupportedError, match="no GPU instance profiles although MIG mode is enabled"):
        open_driver(fake).observe()


class _UnknownEnumBelowCount(FakeNvml):
    """A driver that answers INVALID_ARGUMENT for enum 1 (one it does not know) below pynvml's COUNT."""

    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int, version: int = 2) -> Any:  # noqa: N802
        if profile == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return super().nvmlDeviceGetGpuInstanceProfileInfo(device, profile, version)


def test_an_invalid_argument_below_pynvmls_count_does_not_end_the_enumeration(open_driver: DriverFactory) -> None:
    fake = _UnknownEnumBelowCount.from_spec("A100-80GB", mig_enabled=True)
    table = open_driver(fake).profile_table(0)
    enums = sorted(gi.enum_value for gi in table.gi_profiles)
    assert 1 not in enums
    assert max(enums) > 1, "the profiles past the unknown enum were asked too"


class _NotSupportedWhileMigOff(FakeNvml):
    """A driver answering NOT_SUPPORTED for every GI profile enum (never INVALID_ARGUMENT) while MIG is off."""

    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int, version: int = 2) -> Any:  # noqa: N802
        if self.nvmlDeviceGetMigMode(device)[0] != pynvml.NVML_DEVICE_MIG_ENABLE:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return super().nvmlDeviceGetGpuInstanceProfileInfo(device, profile, version)


def test_a_driver_answering_not_supported_for_every_enum_while_mig_is_off_still_gets_mig_enabled() -> None:
    fake = _NotSupportedWhileMigOff.from_spec("A100-80GB")
    driver = GpuDriver(fake, reset_runner=SimResetRunner(fake))
    layout = parse_layout(ONE_G_LAYOUT, source="layouts.yaml")
    gpus = [identity_of(gpu) for gpu in driver.observe().gpus]  # the catalog's table stands in
    desired = resolve_config(layout, "all-1g", gpus)
    engine = ApplyEngine(driver, MemoryJournal(), clock=FakeClock(), boot_id_provider=FixedBootId())
    with capture_logs():
        result = engine.apply(desired, layout_hash=desired_node_hash(desired), config_name="all-1g")
    assert result.converged, result.error
    gpu = driver.observe().gpu(0)
    assert gpu.mig_current
    assert len(gpu.gpu_instances) == 7


ONE_G_LAYOUT = """\
version: v1
mig-configs:
  all-1g:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
"""


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
