"""The reset session: `nvidia-smi -r` refuses while any NVML client holds the GPU, this process
included, so the driver shuts NVML down around the reset and initialises it again after."""

from __future__ import annotations

import pytest

from migagent.catalog import Placement
from migagent.errors import InUseError
from migagent.nvml import GpuDriver
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner
from tests.unit.nvml.conftest import DriverFactory


class _WatchingResetRunner:
    """Resets through the simulator and records how many NVML clients were attached at that moment."""

    def __init__(self, fake: FakeNvml) -> None:
        self._fake = fake
        self.clients_during_reset: list[int] = []

    def reset(self, pci_bus_id: str) -> None:
        self.clients_during_reset.append(self._fake.sim_nvml_clients)
        SimResetRunner(self._fake).reset(pci_bus_id)


def test_nvml_is_shut_down_while_nvidia_smi_resets_and_initialised_again_after() -> None:
    fake = FakeNvml.from_spec("A100-40GB")
    runner = _WatchingResetRunner(fake)
    with GpuDriver(fake, reset_runner=runner) as driver:
        driver.set_mig_mode(0, enabled=True)
        driver.reset_gpu(0)

        assert runner.clients_during_reset == [0]
        assert fake.sim_nvml_clients == 1
        assert driver.observe().gpu(0).mig_current  # usable straight away, handles taken afresh
    assert fake.sim_nvml_clients == 0


def test_an_ampere_mode_change_completes_because_the_reset_runs_without_our_nvml_session(
    open_driver: DriverFactory,
) -> None:
    fake = FakeNvml.from_spec("2xA100-80GB", mig_enabled=True)
    driver = open_driver(fake)
    driver.create_gpu_instance(1, profile_id=9, placement=Placement(0, 4))

    driver.set_mig_mode(0, enabled=False)
    driver.reset_gpu(0)

    observation = driver.observe()
    assert not observation.gpu(0).mig_current
    assert [gi.placement for gi in observation.gpu(1).gpu_instances] == [Placement(0, 4)]


def test_a_refused_reset_still_initialises_nvml_again_so_the_driver_stays_usable(
    open_driver: DriverFactory,
) -> None:
    fake = FakeNvml.from_spec("A30-24GB")
    fake.sim_set_client_attached(0, True)
    driver = open_driver(fake)
    driver.set_mig_mode(0, enabled=True)

    with pytest.raises(InUseError):
        driver.reset_gpu(0)

    assert fake.sim_nvml_clients == 1
    assert driver.observe().gpu(0).mig_pending


def test_another_nvml_session_in_this_process_blocks_the_reset_as_on_hardware(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("A100-40GB")
    driver = open_driver(fake)
    open_driver(fake)  # e.g. an exporter in the same process that keeps NVML initialised
    driver.set_mig_mode(0, enabled=True)

    with pytest.raises(InUseError, match="NVML client"):
        driver.reset_gpu(0)
    assert not driver.observe().gpu(0).mig_current
