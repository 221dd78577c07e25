"""nvmlInit refcounting, fault injection, the mutation log and printable errors."""

from __future__ import annotations

from ctypes import byref, c_uint
from typing import Any

import pynvml
import pytest

from migagent.sim import FakeNvml
from tests.unit.sim.helpers import create_gi, gi_profile, nvml_code, started


def test_calls_before_nvml_init_raise_uninitialized() -> None:
    fake = FakeNvml.from_spec("A30-24GB")
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()


def test_init_is_reference_counted_and_extra_shutdowns_are_harmless() -> None:
    fake = FakeNvml.from_spec("A30-24GB")
    fake.nvmlInit()
    fake.nvmlInitWithFlags(0)
    fake.nvmlShutdown()
    assert fake.nvmlDeviceGetCount() == 1
    fake.nvmlShutdown()
    fake.nvmlShutdown()
    assert nvml_code(fake.nvmlDeviceGetCount) == pynvml.NVML_ERROR_UNINITIALIZED


def test_an_injected_fault_fires_once_by_default() -> None:
    fake = started()
    fake.sim_inject_fault("nvmlDeviceGetCount", pynvml.NVML_ERROR_TIMEOUT)
    with pytest.raises(pynvml.NVMLError_Timeout):
        fake.nvmlDeviceGetCount()
    assert fake.nvmlDeviceGetCount() == 1


def test_an_injected_fault_fires_the_given_number_of_times() -> None:
    fake = started()
    fake.sim_inject_fault("nvmlDeviceGetCount", pynvml.NVML_ERROR_UNKNOWN, times=2)
    assert nvml_code(fake.nvmlDeviceGetCount) == pynvml.NVML_ERROR_UNKNOWN
    assert nvml_code(fake.nvmlDeviceGetCount) == pynvml.NVML_ERROR_UNKNOWN
    assert fake.nvmlDeviceGetCount() == 1


def test_a_fault_with_times_none_fires_until_cleared() -> None:
    fake = started()
    fake.sim_inject_fault("nvmlDeviceGetCount", pynvml.NVML_ERROR_GPU_IS_LOST, times=None)
    for _ in range(5):
        assert nvml_code(fake.nvmlDeviceGetCount) == pynvml.NVML_ERROR_GPU_IS_LOST
    fake.sim_clear_faults()
    assert fake.nvmlDeviceGetCount() == 1


def test_a_fault_fires_before_the_call_has_any_effect() -> None:
    fake = started()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    fake.sim_inject_fault("nvmlDeviceCreateGpuInstance", pynvml.NVML_ERROR_IN_USE)
    assert nvml_code(lambda: fake.nvmlDeviceCreateGpuInstance(device, 0)) == pynvml.NVML_ERROR_IN_USE
    assert fake.state.gpus[0].gpu_instances == []
    assert fake.sim_mutations == []


def test_a_fault_fires_even_before_nvml_init() -> None:
    fake = FakeNvml.from_spec("A30-24GB")
    fake.sim_inject_fault("nvmlInit", pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        fake.nvmlInit()
    assert nvml_code(fake.nvmlDeviceGetCount) == pynvml.NVML_ERROR_UNINITIALIZED


def test_faults_can_target_the_simulated_gpu_reset() -> None:
    fake = started()
    fake.sim_inject_fault("sim_reset_gpu", pynvml.NVML_ERROR_TIMEOUT)
    assert nvml_code(lambda: fake.sim_reset_gpu("00000000:18:00.0")) == pynvml.NVML_ERROR_TIMEOUT


def test_injecting_into_an_unknown_function_lists_the_valid_ones() -> None:
    fake = started()
    with pytest.raises(ValueError, match="nvmlDeviceCreateGpuInstanceWithPlacement"):
        fake.sim_inject_fault("nvmlDeviceCreateGpuInstanceTypo", pynvml.NVML_ERROR_IN_USE)


@pytest.mark.parametrize("error", [0, 31, 12345])
def test_injecting_an_unknown_error_code_is_refused(error: int) -> None:
    with pytest.raises(ValueError, match="not an NVML_ERROR"):
        started().sim_inject_fault("nvmlDeviceGetCount", error)


def test_injecting_with_times_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="times must be at least 1"):
        started().sim_inject_fault("nvmlDeviceGetCount", pynvml.NVML_ERROR_UNKNOWN, times=0)


def test_the_mutation_log_lists_successful_mutating_calls_in_order_and_can_be_reset() -> None:
    fake = started("A30-24GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    full = gi_profile("A30-24GB", "4g.24gb").id
    gi = create_gi(fake, device, full, 0, 4)
    nvml_code(lambda: create_gi(fake, device, full, 0, 4))  # fails: not logged
    fake.nvmlDeviceGetGpuInstanceById(device, 0)  # reading is never logged
    ci = fake.nvmlGpuInstanceCreateComputeInstance(gi, 3)
    fake.nvmlComputeInstanceDestroy(ci)
    fake.nvmlGpuInstanceDestroy(gi)
    fake.nvmlDeviceSetMigMode(device, pynvml.NVML_DEVICE_MIG_DISABLE)
    assert fake.sim_mutations == [
        "nvmlDeviceCreateGpuInstanceWithPlacement",
        "nvmlGpuInstanceCreateComputeInstance",
        "nvmlComputeInstanceDestroy",
        "nvmlGpuInstanceDestroy",
        "nvmlDeviceSetMigMode",
    ]
    fake.sim_mutations = []
    fake.nvmlDeviceGetMigMode(device)
    assert fake.sim_mutations == []


ALL_ERROR_CODES = sorted(pynvml.NVMLError._valClassMapping)


@pytest.mark.parametrize("code", ALL_ERROR_CODES)
def test_every_nvml_error_the_fake_can_raise_prints_without_crashing(code: int) -> None:
    fake = started()
    fake.sim_inject_fault("nvmlDeviceGetCount", code)
    with pytest.raises(pynvml.NVMLError) as info:
        fake.nvmlDeviceGetCount()
    assert type(info.value) is pynvml.nvmlExceptionClass(code)
    assert str(info.value)
    assert repr(info.value)


def test_errors_the_fake_raises_by_itself_are_pynvml_classes_that_print() -> None:
    fake = started("A100-40GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    gi = create_gi(fake, device, gi_profile("A100-40GB", "7g.40gb").id, 0, 8)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 4)
    idle = FakeNvml.from_spec("A30-24GB")
    calls: list[tuple[int, Any]] = [
        (pynvml.NVML_ERROR_UNINITIALIZED, idle.nvmlDeviceGetCount),
        (pynvml.NVML_ERROR_INVALID_ARGUMENT, lambda: fake.nvmlDeviceGetHandleByIndex(9)),
        (pynvml.NVML_ERROR_NOT_SUPPORTED, lambda: fake.nvmlDeviceGetGpuInstanceProfileInfo(device, 8)),
        (pynvml.NVML_ERROR_NOT_FOUND, lambda: fake.nvmlDeviceGetGpuInstanceById(device, 3)),
        (pynvml.NVML_ERROR_IN_USE, lambda: fake.nvmlGpuInstanceDestroy(gi)),
        (pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES, lambda: fake.nvmlDeviceCreateGpuInstance(device, 0)),
        (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, lambda: fake.nvmlDeviceGetGpuInstanceProfileInfo(device, 0, 3)),
        (pynvml.NVML_ERROR_INSUFFICIENT_SIZE, lambda: fake.nvmlDeviceGetGpuInstancePossiblePlacements(
            device, 19, (pynvml.c_nvmlGpuInstancePlacement_t * 1)(), byref(c_uint(0)))),
    ]
    for expected, call in calls:
        with pytest.raises(pynvml.NVMLError) as info:
            call()
        assert type(info.value) is pynvml.nvmlExceptionClass(expected)
        assert str(info.value)


def test_nvml_error_string_gives_the_real_library_texts() -> None:
    fake = FakeNvml.from_spec("A30-24GB")
    assert fake.nvmlErrorString(pynvml.NVML_ERROR_IN_USE) == "In use by another client"
    assert fake.nvmlErrorString(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES) == "Insufficient Resources"
    assert fake.nvmlErrorString(pynvml.NVML_ERROR_NOT_FOUND) == "Not Found"
