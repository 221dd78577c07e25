"""GPU enumeration and identity through the pynvml surface."""

from __future__ import annotations

import ctypes
import uuid

import pynvml
import pytest

from migagent.catalog import model_by_key
from migagent.sim import FakeNvml
from tests.unit.sim.helpers import nvml_code, started


def test_every_gpu_of_the_spec_is_enumerated_with_its_model_name_and_pci_id() -> None:
    fake = started("2xA100-40GB,A30-24GB")
    assert fake.nvmlDeviceGetCount() == 3
    names = [fake.nvmlDeviceGetName(fake.nvmlDeviceGetHandleByIndex(i)) for i in range(3)]
    assert names == ["NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", "NVIDIA A30"]
    pci = fake.nvmlDeviceGetPciInfo(fake.nvmlDeviceGetHandleByIndex(2))
    assert pci.pciDeviceId == model_by_key("A30-24GB").primary_pci_device_id == 0x20B710DE


def test_handles_are_pynvml_device_pointers() -> None:
    fake = started()
    assert isinstance(fake.nvmlDeviceGetHandleByIndex(0), pynvml.c_nvmlDevice_t)


def test_gpu_uuids_are_uuid5_of_the_spec_position_and_reproducible() -> None:
    first = started("2xH100-80GB-SXM")
    second = started("H100-80GB-SXM,A30-24GB")
    uuids = [first.nvmlDeviceGetUUID(first.nvmlDeviceGetHandleByIndex(i)) for i in range(2)]
    assert uuids[0] != uuids[1]
    assert all(u.startswith("GPU-") and uuid.UUID(u[4:]).version == 5 for u in uuids)
    assert second.nvmlDeviceGetUUID(second.nvmlDeviceGetHandleByIndex(1)) == uuids[1]


def test_pci_bus_ids_are_distinct_and_in_nvml_format() -> None:
    fake = started("3xA30-24GB")
    infos = [fake.nvmlDeviceGetPciInfo(fake.nvmlDeviceGetHandleByIndex(i)) for i in range(3)]
    assert [info.busId for info in infos] == ["00000000:18:00.0", "00000000:19:00.0", "00000000:1A:00.0"]
    assert [info.bus for info in infos] == [0x18, 0x19, 0x1A]
    assert infos[0].busIdLegacy == "0000:18:00.0"


def test_a_bad_device_index_is_invalid_argument() -> None:
    fake = started("2xA30-24GB")
    assert nvml_code(lambda: fake.nvmlDeviceGetHandleByIndex(2)) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_get_handle_by_uuid_finds_a_gpu_and_rejects_an_unknown_uuid() -> None:
    fake = started("2xA30-24GB")
    second = fake.nvmlDeviceGetHandleByIndex(1)
    by_uuid = fake.nvmlDeviceGetHandleByUUID(fake.nvmlDeviceGetUUID(second))
    assert ctypes.addressof(by_uuid.contents) == ctypes.addressof(second.contents)
    first_uuid = fake.state.gpus[0].uuid
    assert fake.nvmlDeviceGetUUID(fake.nvmlDeviceGetHandleByUUID(first_uuid.encode())) == first_uuid
    unknown = f"GPU-{uuid.uuid4()}"
    assert nvml_code(lambda: fake.nvmlDeviceGetHandleByUUID(unknown)) == pynvml.NVML_ERROR_NOT_FOUND


@pytest.mark.parametrize("bus_id", ["00000000:19:00.0", "0000:19:00.0", "19:00.0", "0:19:0", b"00000000:19:00.0"])
def test_get_handle_by_pci_bus_id_accepts_the_forms_nvml_parses(bus_id: str | bytes) -> None:
    fake = started("2xA30-24GB")
    handle = fake.nvmlDeviceGetHandleByPciBusId(bus_id)
    assert fake.nvmlDeviceGetUUID(handle) == fake.state.gpus[1].uuid


def test_get_handle_by_pci_bus_id_rejects_malformed_and_unknown_ids() -> None:
    fake = started("A30-24GB")
    assert nvml_code(lambda: fake.nvmlDeviceGetHandleByPciBusId("gpu0")) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert nvml_code(lambda: fake.nvmlDeviceGetHandleByPciBusId("0000:3b:00.0")) == pynvml.NVML_ERROR_NOT_FOUND


def test_memory_info_reports_the_model_total_in_bytes_in_both_versions() -> None:
    fake = started("A100-40GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    memory = fake.nvmlDeviceGetMemoryInfo(device)
    assert isinstance(memory, pynvml.c_nvmlMemory_t)
    assert memory.total == 40960 * 1024 * 1024
    assert memory.free == memory.total
    assert memory.used == 0
    v2 = fake.nvmlDeviceGetMemoryInfo(device, version=pynvml.nvmlMemory_v2)
    assert isinstance(v2, pynvml.c_nvmlMemory_v2_t)
    assert v2.version == pynvml.nvmlMemory_v2
    assert v2.total == memory.total


def test_a_gpu_without_mig_reports_its_whole_gpu_processes_with_no_instance_ids() -> None:
    fake = FakeNvml.from_spec("H100-80GB-SXM")
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.nvmlDeviceGetComputeRunningProcesses(device) == []
    fake.sim_attach_process(fake.nvmlDeviceGetUUID(device), pid=77, used_memory_bytes=1024)
    [process] = fake.nvmlDeviceGetComputeRunningProcesses(device)
    assert (process.pid, process.usedGpuMemory) == (77, 1024)
    assert process.gpuInstanceId == process.computeInstanceId == 0xFFFFFFFF
    assert fake.nvmlDeviceGetMemoryInfo(device).used == 1024


def test_an_instance_handle_is_rejected_where_a_device_handle_is_expected() -> None:
    fake = started("A30-24GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    gi = fake.nvmlDeviceCreateGpuInstance(device, 0)
    assert nvml_code(lambda: fake.nvmlDeviceGetName(gi)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert nvml_code(lambda: fake.nvmlDeviceGetMigMode(None)) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_handles_of_another_fake_are_invalid() -> None:
    first, second = started("A30-24GB"), started("A30-24GB")
    foreign = first.nvmlDeviceGetHandleByIndex(0)
    assert nvml_code(lambda: second.nvmlDeviceGetName(foreign)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
