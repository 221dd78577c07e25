"""Creating and destroying GPU and compute instances through the driver, and what NVML refuses."""

from __future__ import annotations

import pytest

from migagent.catalog import Placement
from migagent.errors import InsufficientResourcesError, InUseError, PermanentError
from migagent.sim import FakeNvml
from tests.unit.nvml.conftest import DriverFactory


def test_a_gi_created_at_a_placement_is_observed_there_and_gone_after_destroy(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("A100-40GB", mig_enabled=True)
    driver = open_driver(fake)

    gi_id = driver.create_gpu_instance(0, profile_id=14, placement=Placement(4, 2))
    created = driver.observe().gpu(0).gi_at(Placement(4, 2))
    assert created is not None
    assert (created.id, created.profile_id) == (gi_id, 14)

    driver.destroy_gpu_instance(0, gi_id=gi_id)
    assert driver.observe().gpu(0).gpu_instances == ()
    assert fake.sim_mutations == ["nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceDestroy"]


def test_a_ci_created_without_placement_uses_nvmls_choice_and_round_trips(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("H100-80GB-SXM", mig_enabled=True)
    driver = open_driver(fake)
    gi_id = driver.create_gpu_instance(0, profile_id=9, placement=Placement(0, 4))

    ci_id = driver.create_compute_instance(0, gi_id=gi_id, profile_id=2)
    gi = driver.observe().gpu(0).gpu_instances[0]
    assert [(ci.id, ci.profile_id, ci.placement) for ci in gi.compute_instances] == [(ci_id, 2, Placement(0, 3))]

    driver.destroy_compute_instance(0, gi_id=gi_id, ci_id=ci_id)
    assert driver.observe().gpu(0).gpu_instances[0].compute_instances == ()
    assert fake.sim_mutations[-2:] == ["nvmlGpuInstanceCreateComputeInstance", "nvmlComputeInstanceDestroy"]


def test_a_ci_created_at_a_placement_lands_there(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("A100-80GB", mig_enabled=True)
    driver = open_driver(fake)
    gi_id = driver.create_gpu_instance(0, profile_id=0, placement=Placement(0, 8))

    ci_id = driver.create_compute_instance(0, gi_id=gi_id, profile_id=2, placement=Placement(4, 3))

    ci = driver.observe().gpu(0).gpu_instances[0].compute_instances[0]
    assert (ci.id, ci.profile_id, ci.placement) == (ci_id, 2, Placement(4, 3))
    assert fake.sim_mutations[-1] == "nvmlGpuInstanceCreateComputeInstanceWithPlacement"


def test_creating_a_gi_on_occupied_slices_raises_insufficient_resources_naming_gpu_and_placement(
    open_driver: DriverFactory,
) -> None:
    fake = FakeNvml.from_spec("A100-40GB", mig_enabled=True)
    driver = open_driver(fake)
    driver.create_gpu_instance(0, profile_id=5, placement=Placement(0, 4))

    with pytest.raises(InsufficientResourcesError) as caught:
        driver.create_gpu_instance(0, profile_id=9, placement=Placement(0, 4))

    message = str(caught.value)
    assert fake.state.gpus[0].pci_bus_id in message
    assert "GPU 0" in message
    assert "profile 9 at 0:4" in message
    assert "NVML_ERROR_INSUFFICIENT_RESOURCES" in message


def test_destroying_a_gi_with_compute_instances_raises_in_use(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("A30-24GB", mig_enabled=True)
    driver = open_driver(fake)
    gi_id = driver.create_gpu_instance(0, profile_id=0, placement=Placement(0, 4))
    driver.create_compute_instance(0, gi_id=gi_id, profile_id=3)

    with pytest.raises(InUseError, match=f"nvmlGpuInstanceDestroy\\(GI {gi_id}\\)"):
        driver.destroy_gpu_instance(0, gi_id=gi_id)
    assert len(driver.observe().gpu(0).gpu_instances) == 1


def test_destroying_a_ci_with_a_running_process_raises_in_use(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("A30-24GB", mig_enabled=True)
    driver = open_driver(fake)
    gi_id = driver.create_gpu_instance(0, profile_id=14, placement=Placement(3, 1))
    ci_id = driver.create_compute_instance(0, gi_id=gi_id, profile_id=0)
    fake.sim_attach_process(fake.state.gpus[0].gpu_instances[0].compute_instances[0].uuid, pid=77)

    with pytest.raises(InUseError):
        driver.destroy_compute_instance(0, gi_id=gi_id, ci_id=ci_id)


def test_destroying_a_gi_that_does_not_exist_is_a_clear_permanent_error_not_a_silent_success(
    open_driver: DriverFactory,
) -> None:
    fake = FakeNvml.from_spec("A100-40GB", mig_enabled=True)
    driver = open_driver(fake)

    with pytest.raises(PermanentError, match="GPU instance 5 does not exist") as caught:
        driver.destroy_gpu_instance(0, gi_id=5)
    assert type(caught.value) is PermanentError
    assert fake.sim_mutations == []


def test_destroying_a_ci_that_does_not_exist_names_the_ci_and_its_gi(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("A100-40GB", mig_enabled=True)
    driver = open_driver(fake)
    gi_id = driver.create_gpu_instance(0, profile_id=9, placement=Placement(0, 4))

    with pytest.raises(PermanentError, match=f"compute instance 3 of GPU instance {gi_id} does not exist"):
        driver.destroy_compute_instance(0, gi_id=gi_id, ci_id=3)


def test_creating_a_ci_in_a_missing_gi_is_a_permanent_error(open_driver: DriverFactory) -> None:
    driver = open_driver(FakeNvml.from_spec("H200-141GB", mig_enabled=True))
    with pytest.raises(PermanentError, match="GPU instance 9 does not exist"):
        driver.create_compute_instance(0, gi_id=9, profile_id=0)
