"""MIG mode changes (Hopper in place, Ampere pending until reset, pass-through needs a reboot) and resets."""

from __future__ import annotations

import pytest

from migagent.catalog import Placement
from migagent.errors import InUseError, NotSupportedError
from migagent.nvml import ModeActivation
from migagent.sim import FakeNvml
from tests.unit.nvml.conftest import DriverFactory


def test_enabling_mig_on_an_idle_hopper_gpu_is_active_at_once(open_driver: DriverFactory) -> None:
    driver = open_driver(FakeNvml.from_spec("H100-80GB-SXM"))

    assert driver.set_mig_mode(0, enabled=True) is ModeActivation.ACTIVE

    gpu = driver.observe().gpu(0)
    assert (gpu.mig_current, gpu.mig_pending) == (True, True)


def test_enabling_mig_on_a_busy_hopper_gpu_stays_pending(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("H200-141GB")
    fake.sim_set_client_attached(0, True)
    driver = open_driver(fake)

    assert driver.set_mig_mode(0, enabled=True) is ModeActivation.PENDING_RESET
    assert driver.observe().gpu(0).mode_change_pending


def test_enabling_mig_on_ampere_is_pending_until_the_gpu_is_reset(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("A100-40GB")
    driver = open_driver(fake)

    assert driver.set_mig_mode(0, enabled=True) is ModeActivation.PENDING_RESET
    gpu = driver.observe().gpu(0)
    assert (gpu.mig_current, gpu.mig_pending) == (False, True)

    driver.reset_gpu(0)

    gpu = driver.observe().gpu(0)
    assert (gpu.mig_current, gpu.mig_pending) == (True, True)
    assert fake.sim_mutations == ["nvmlDeviceSetMigMode", "sim_reset_gpu"]


def test_enabling_mig_on_ampere_with_a_client_attached_is_pending_reset(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("A30-24GB")
    fake.sim_set_client_attached(0, True)
    driver = open_driver(fake)

    assert driver.set_mig_mode(0, enabled=True) is ModeActivation.PENDING_RESET
    with pytest.raises(InUseError, match=fake.state.gpus[0].pci_bus_id):
        driver.reset_gpu(0)

    fake.sim_set_client_attached(0, False)
    driver.reset_gpu(0)
    assert driver.observe().gpu(0).mig_current


def test_enabling_mig_on_an_idle_ampere_gpu_whose_driver_resets_it_is_active(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("A100-80GB")
    fake.sim_set_ampere_auto_reset(0, True)

    assert open_driver(fake).set_mig_mode(0, enabled=True) is ModeActivation.ACTIVE


def test_a_mode_change_in_a_passthrough_vm_needs_a_reboot(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("A100-40GB")
    fake.sim_set_reset_supported(0, False)
    driver = open_driver(fake)

    assert driver.set_mig_mode(0, enabled=True) is ModeActivation.REBOOT_REQUIRED
    with pytest.raises(NotSupportedError):
        driver.reset_gpu(0)


def test_setting_the_mode_a_gpu_already_has_is_active(open_driver: DriverFactory) -> None:
    driver = open_driver(FakeNvml.from_spec("A100-40GB", mig_enabled=True))
    assert driver.set_mig_mode(0, enabled=True) is ModeActivation.ACTIVE


def test_disabling_mig_while_gpu_instances_exist_raises_in_use(open_driver: DriverFactory) -> None:
    driver = open_driver(FakeNvml.from_spec("H100-80GB-SXM", mig_enabled=True))
    driver.create_gpu_instance(0, profile_id=19, placement=Placement(3, 1))

    with pytest.raises(InUseError, match=r"nvmlDeviceSetMigMode\(disable\)"):
        driver.set_mig_mode(0, enabled=False)


def test_a_reset_destroys_every_instance_of_that_gpu_only_and_handles_are_reacquired(
    open_driver: DriverFactory,
) -> None:
    fake = FakeNvml.from_spec("2xA100-40GB", mig_enabled=True)
    driver = open_driver(fake)
    for gpu in (0, 1):
        gi_id = driver.create_gpu_instance(gpu, profile_id=9, placement=Placement(0, 4))
        driver.create_compute_instance(gpu, gi_id=gi_id, profile_id=2)

    driver.reset_gpu(0)

    observation = driver.observe()
    assert observation.gpu(0).gpu_instances == ()
    assert observation.gpu(0).mig_current
    assert [gi.placement for gi in observation.gpu(1).gpu_instances] == [Placement(0, 4)]
    # The driver keeps no handle across the reset: creating on the reset GPU works straight away.
    assert driver.create_gpu_instance(0, profile_id=0, placement=Placement(0, 8)) == 0


def test_a_reset_refused_because_a_process_runs_raises_in_use(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("A30-24GB", mig_enabled=True)
    driver = open_driver(fake)
    gi_id = driver.create_gpu_instance(0, profile_id=0, placement=Placement(0, 4))
    driver.create_compute_instance(0, gi_id=gi_id, profile_id=3)
    fake.sim_attach_process(fake.state.gpus[0].gpu_instances[0].compute_instances[0].uuid, pid=9)

    with pytest.raises(InUseError):
        driver.reset_gpu(0)
    assert len(driver.observe().gpu(0).gpu_instances) == 1


def test_the_mode_is_read_back_through_a_handle_acquired_after_set_mig_mode_which_may_unbind_the_gpu(
    open_driver: DriverFactory,
) -> None:
    # nvml.h: nvmlDeviceSetMigMode "may unbind or reset the device"; the fake makes the old handle stale.
    driver = open_driver(FakeNvml.from_spec("B200-180GB"))

    assert driver.set_mig_mode(0, enabled=True) is ModeActivation.ACTIVE
    assert driver.set_mig_mode(0, enabled=False) is ModeActivation.ACTIVE
