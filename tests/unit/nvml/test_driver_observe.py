"""observe(): identity, MIG mode, GIs at their placements, CIs, MIG UUIDs and processes."""

from __future__ import annotations

import pynvml
import pytest

from migagent.catalog import Placement, model_by_key
from migagent.layout.observed import ObservedProcess
from migagent.nvml import GpuDriver
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner
from tests.unit.nvml.conftest import DriverFactory

MIXED = "2xA100-40GB,1xA30-24GB"


def _mig_uuids(fake: FakeNvml, gpu: int) -> dict[tuple[int, int], str]:
    return {(gi.id, ci.id): ci.uuid for gi in fake.state.gpus[gpu].gpu_instances for ci in gi.compute_instances}


def test_observe_reads_identity_mode_and_reset_needs_of_every_gpu_on_a_mixed_node(
    open_driver: DriverFactory,
) -> None:
    fake = FakeNvml.from_spec(MIXED, mig_enabled=True)
    observation = open_driver(fake).observe()

    assert [gpu.index for gpu in observation.gpus] == [0, 1, 2]
    assert [gpu.name for gpu in observation.gpus] == ["NVIDIA A100-SXM4-40GB"] * 2 + ["NVIDIA A30"]
    assert [gpu.pci_device_id for gpu in observation.gpus] == [0x20B010DE, 0x20B010DE, 0x20B710DE]
    assert [gpu.uuid for gpu in observation.gpus] == [gpu.uuid for gpu in fake.state.gpus]
    assert [gpu.pci_bus_id for gpu in observation.gpus] == [gpu.pci_bus_id for gpu in fake.state.gpus]
    assert all(gpu.mig_capable and gpu.mig_current and gpu.mig_pending for gpu in observation.gpus)
    assert all(gpu.mode_change_needs_reset for gpu in observation.gpus)
    assert all(gpu.gpu_instances == () for gpu in observation.gpus)


def test_observe_reports_gis_at_placements_with_their_cis_and_mig_uuids_on_a_mixed_node(
    open_driver: DriverFactory,
) -> None:
    fake = FakeNvml.from_spec(MIXED, mig_enabled=True)
    driver = open_driver(fake)
    three_g = driver.create_gpu_instance(0, profile_id=9, placement=Placement(4, 4))
    driver.create_compute_instance(0, gi_id=three_g, profile_id=0, placement=Placement(2, 1))
    driver.create_compute_instance(0, gi_id=three_g, profile_id=1, placement=Placement(0, 2))
    one_g = driver.create_gpu_instance(0, profile_id=19, placement=Placement(1, 1))
    driver.create_compute_instance(0, gi_id=one_g, profile_id=0)
    a30_two_g = driver.create_gpu_instance(2, profile_id=5, placement=Placement(2, 2))
    driver.create_compute_instance(2, gi_id=a30_two_g, profile_id=0, placement=Placement(0, 1))
    driver.create_compute_instance(2, gi_id=a30_two_g, profile_id=0, placement=Placement(1, 1))

    observation = driver.observe()

    a100 = observation.gpu(0)
    assert [(gi.id, gi.profile_id, gi.placement) for gi in a100.gpu_instances] == [
        (8, 19, Placement(1, 1)),
        (2, 9, Placement(4, 4)),
    ]
    three_g_gi = a100.gi_at(Placement(4, 4))
    assert three_g_gi is not None
    assert [(ci.id, ci.profile_id, ci.placement) for ci in three_g_gi.compute_instances] == [
        (0, 0, Placement(2, 1)),
        (1, 1, Placement(0, 2)),
    ]
    assert observation.gpu(1).gpu_instances == ()
    a30_gi = observation.gpu(2).gi_at(Placement(2, 2))
    assert a30_gi is not None
    assert (a30_gi.id, a30_gi.profile_id, a30_gi.ci_profile_ids) == (a30_two_g, 5, (0, 0))

    for index in (0, 2):
        observed = {
            (gi.id, ci.id): ci.uuid for gi in observation.gpu(index).gpu_instances for ci in gi.compute_instances
        }
        assert observed == _mig_uuids(fake, index)
        assert all(uuid.startswith("MIG-") for uuid in observed.values())


def test_observe_puts_each_process_on_the_mig_device_it_runs_on(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec(MIXED, mig_enabled=True)
    driver = open_driver(fake)
    gi = driver.create_gpu_instance(2, profile_id=5, placement=Placement(0, 2))
    busy = driver.create_compute_instance(2, gi_id=gi, profile_id=0, placement=Placement(0, 1))
    idle = driver.create_compute_instance(2, gi_id=gi, profile_id=0, placement=Placement(1, 1))
    busy_uuid = _mig_uuids(fake, 2)[(gi, busy)]
    fake.sim_attach_process(busy_uuid, pid=4242, used_memory_bytes=3 << 30)
    fake.sim_attach_process(busy_uuid, pid=4243)

    observed_gi = driver.observe().gpu(2).gpu_instances[0]

    by_id = {ci.id: ci for ci in observed_gi.compute_instances}
    assert by_id[busy].processes == (ObservedProcess(4242, 3 << 30), ObservedProcess(4243, 0))
    assert by_id[idle].processes == ()
    assert observed_gi.processes == ((busy_uuid, ObservedProcess(4242, 3 << 30)), (busy_uuid, ObservedProcess(4243, 0)))


def test_observe_reports_processes_on_a_whole_gpu_while_mig_is_off(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("2xH100-80GB-SXM")
    driver = open_driver(fake)
    fake.sim_attach_process(driver.observe().gpu(1).uuid, pid=77, used_memory_bytes=1 << 30)

    observation = driver.observe()

    assert observation.gpu(1).processes == (ObservedProcess(77, 1 << 30),)
    assert observation.gpu(0).processes == ()


def test_placements_come_from_nvml_not_from_gi_ids_under_the_xor4_id_map(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("A100-40GB", gi_id_map="xor4", mig_enabled=True)
    driver = open_driver(fake)
    three_g = driver.create_gpu_instance(0, profile_id=9, placement=Placement(4, 4))
    one_g = driver.create_gpu_instance(0, profile_id=19, placement=Placement(0, 1))
    two_g = driver.create_gpu_instance(0, profile_id=14, placement=Placement(2, 2))

    observed = {gi.id: gi.placement for gi in driver.observe().gpu(0).gpu_instances}

    # Swapped halves: 3g@4 is ID 1 (standard 2), 1g@0 is ID 11 (standard 7), 2g@2 is ID 6 (standard 4).
    assert (three_g, one_g, two_g) == (1, 11, 6)
    assert observed == {1: Placement(4, 4), 11: Placement(0, 1), 6: Placement(2, 2)}


def test_a_gpu_with_mig_disabled_reports_no_instances_and_a_pending_enable_when_set(
    open_driver: DriverFactory,
) -> None:
    fake = FakeNvml.from_spec("A100-40GB,H100-80GB-SXM")
    driver = open_driver(fake)
    driver.set_mig_mode(0, enabled=True)

    a100, h100 = driver.observe().gpus

    assert (a100.mig_capable, a100.mig_current, a100.mig_pending, a100.mode_change_pending) == (True, False, True, True)
    assert (h100.mig_current, h100.mig_pending, h100.mode_change_needs_reset) == (False, False, False)
    assert a100.gpu_instances == h100.gpu_instances == ()


def test_observations_are_fresh_reads_not_cached(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("H100-80GB-SXM", mig_enabled=True)
    driver = open_driver(fake)
    assert driver.observe().gpu(0).gpu_instances == ()
    driver.create_gpu_instance(0, profile_id=0, placement=Placement(0, 8))
    assert [gi.profile_id for gi in driver.observe().gpu(0).gpu_instances] == [0]


def test_observe_fills_each_gpus_profile_table(open_driver: DriverFactory) -> None:
    observation = open_driver(FakeNvml.from_spec(MIXED, mig_enabled=True)).observe()
    a30_table = observation.gpu(2).profiles
    assert a30_table is not None
    assert sorted(gi.id for gi in a30_table.gi_profiles) == sorted(
        gi.id for gi in model_by_key("A30-24GB").profiles.gi_profiles
    )


def test_the_driver_opens_and_closes_nvml_as_a_context_manager() -> None:
    fake = FakeNvml.from_spec("A30-24GB")
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        assert len(driver.observe().gpus) == 1
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
