"""MIG devices: one per CI, their handles, UUIDs, names, order and processes (docs/nvml.md §10)."""

from __future__ import annotations

import ctypes
import uuid
from typing import Any

import pynvml
import pytest

from migagent.sim import FakeNvml
from tests.unit.sim.helpers import create_gi, nvml_code, started

A100 = "A100-40GB"


def mig_devices(fake: FakeNvml, device: Any) -> list[Any]:
    found = []
    for index in range(fake.nvmlDeviceGetMaxMigDeviceCount(device)):
        try:
            found.append(fake.nvmlDeviceGetMigDeviceHandleByIndex(device, index))
        except pynvml.NVMLError_NotFound:
            continue
    return found


def layout(fake: FakeNvml) -> Any:
    """GI 1 (3g@0:4) with CIs 0 (2c) and 1 (1c), GI 2 (3g@4:4) with CI 0 (full), created out of order."""
    device = fake.nvmlDeviceGetHandleByIndex(0)
    upper = create_gi(fake, device, 9, 4, 4)
    lower = create_gi(fake, device, 9, 0, 4)
    fake.nvmlGpuInstanceCreateComputeInstance(upper, 2)
    fake.nvmlGpuInstanceCreateComputeInstance(lower, 1)
    fake.nvmlGpuInstanceCreateComputeInstance(lower, 0)
    return device


def test_there_is_one_mig_device_per_ci_in_ascending_gi_then_ci_order() -> None:
    fake = started(A100)
    device = layout(fake)
    ids = [
        (fake.nvmlDeviceGetGpuInstanceId(m), fake.nvmlDeviceGetComputeInstanceId(m)) for m in mig_devices(fake, device)
    ]
    assert ids == [(1, 0), (1, 1), (2, 0)]


def test_mig_devices_are_named_after_their_parent_and_profile() -> None:
    fake = started(A100)
    device = layout(fake)
    names = [fake.nvmlDeviceGetName(m) for m in mig_devices(fake, device)]
    assert names == [
        "NVIDIA A100-SXM4-40GB MIG 2c.3g.20gb",
        "NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb",
        "NVIDIA A100-SXM4-40GB MIG 3g.20gb",
    ]


def test_mig_uuids_are_uuid5_like_and_distinct() -> None:
    fake = started(A100)
    uuids = [fake.nvmlDeviceGetUUID(m) for m in mig_devices(fake, layout(fake))]
    assert len(set(uuids)) == 3
    for text in uuids:
        assert text.startswith("MIG-")
        assert text.split("-")[3].startswith("5")
        assert uuid.UUID(text[4:]).version == 5


def test_a_mig_uuid_is_stable_for_the_ci_lifetime_and_new_after_recreation() -> None:
    fake = started("A30-24GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    gi = fake.nvmlDeviceCreateGpuInstance(device, 0)
    ci = fake.nvmlGpuInstanceCreateComputeInstance(gi, 3)
    first = fake.nvmlDeviceGetUUID(fake.nvmlDeviceGetMigDeviceHandleByIndex(device, 0))
    fake.nvmlDeviceGetComputeRunningProcesses(device)
    assert fake.nvmlDeviceGetUUID(fake.nvmlDeviceGetMigDeviceHandleByIndex(device, 0)) == first
    fake.nvmlComputeInstanceDestroy(ci)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 3)
    assert fake.nvmlDeviceGetUUID(fake.nvmlDeviceGetMigDeviceHandleByIndex(device, 0)) != first


def test_get_handle_by_uuid_returns_the_mig_device_for_a_mig_uuid() -> None:
    fake = started(A100)
    device = layout(fake)
    third = mig_devices(fake, device)[2]
    handle = fake.nvmlDeviceGetHandleByUUID(fake.nvmlDeviceGetUUID(third))
    assert fake.nvmlDeviceIsMigDeviceHandle(handle).value == 1
    assert ctypes.cast(handle, ctypes.c_void_p).value == ctypes.cast(third, ctypes.c_void_p).value


def test_is_mig_device_handle_returns_a_c_uint() -> None:
    fake = started(A100)
    device = layout(fake)
    result = fake.nvmlDeviceIsMigDeviceHandle(mig_devices(fake, device)[0])
    assert isinstance(result, ctypes.c_uint)
    assert result.value == 1
    assert not isinstance(result, int)  # as with real pynvml, compare `.value`, never the object
    assert fake.nvmlDeviceIsMigDeviceHandle(device).value == 0


def test_an_empty_slot_below_the_maximum_is_not_found_and_past_it_invalid() -> None:
    fake = started(A100)
    device = layout(fake)
    assert fake.nvmlDeviceGetMaxMigDeviceCount(device) == 7
    assert nvml_code(lambda: fake.nvmlDeviceGetMigDeviceHandleByIndex(device, 3)) == pynvml.NVML_ERROR_NOT_FOUND
    assert nvml_code(lambda: fake.nvmlDeviceGetMigDeviceHandleByIndex(device, 7)) == (
        pynvml.NVML_ERROR_INVALID_ARGUMENT
    )


def test_the_maximum_mig_device_count_is_zero_with_mig_disabled_and_four_on_a30() -> None:
    disabled = FakeNvml.from_spec(A100)
    disabled.nvmlInit()
    assert disabled.nvmlDeviceGetMaxMigDeviceCount(disabled.nvmlDeviceGetHandleByIndex(0)) == 0
    a30 = started("A30-24GB")
    assert a30.nvmlDeviceGetMaxMigDeviceCount(a30.nvmlDeviceGetHandleByIndex(0)) == 4


def test_instance_ids_on_a_physical_handle_are_not_supported() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert nvml_code(lambda: fake.nvmlDeviceGetGpuInstanceId(device)) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert nvml_code(lambda: fake.nvmlDeviceGetComputeInstanceId(device)) == pynvml.NVML_ERROR_NOT_SUPPORTED


def test_the_parent_of_a_mig_device_is_its_gpu() -> None:
    fake = started("2xA100-40GB")
    device = fake.nvmlDeviceGetHandleByIndex(1)
    fake.nvmlGpuInstanceCreateComputeInstance(fake.nvmlDeviceCreateGpuInstance(device, 0), 4)
    parent = fake.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(fake.nvmlDeviceGetMigDeviceHandleByIndex(device, 0))
    assert fake.nvmlDeviceGetUUID(parent) == fake.state.gpus[1].uuid
    assert nvml_code(lambda: fake.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(device)) == (
        pynvml.NVML_ERROR_INVALID_ARGUMENT
    )


def test_processes_are_listed_per_mig_device_and_all_on_the_parent() -> None:
    fake = started(A100)
    device = layout(fake)
    first, _second, third = mig_devices(fake, device)
    fake.sim_attach_process(fake.nvmlDeviceGetUUID(first), pid=11, used_memory_bytes=5 << 20)
    fake.sim_attach_process(fake.nvmlDeviceGetUUID(third), pid=33)
    [on_first] = fake.nvmlDeviceGetComputeRunningProcesses(first)
    assert (on_first.pid, on_first.usedGpuMemory, on_first.gpuInstanceId, on_first.computeInstanceId) == (
        11, 5 << 20, 1, 0
    )
    on_parent = fake.nvmlDeviceGetComputeRunningProcesses(device)
    assert [(p.pid, p.gpuInstanceId, p.computeInstanceId) for p in on_parent] == [(11, 1, 0), (33, 2, 0)]
    assert fake.nvmlDeviceGetMemoryInfo(first).used == 5 << 20
    fake.sim_detach_process(11)
    assert fake.nvmlDeviceGetComputeRunningProcesses(first) == []


def test_a_mig_device_reports_its_gi_memory() -> None:
    fake = started(A100)
    device = layout(fake)
    memory = fake.nvmlDeviceGetMemoryInfo(mig_devices(fake, device)[0])
    assert memory.total == 19968 * 1024 * 1024  # 3g.20gb


def test_a_destroyed_cis_mig_handle_is_stale() -> None:
    fake = started("A30-24GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    ci = fake.nvmlGpuInstanceCreateComputeInstance(fake.nvmlDeviceCreateGpuInstance(device, 0), 3)
    mig = fake.nvmlDeviceGetMigDeviceHandleByIndex(device, 0)
    fake.nvmlComputeInstanceDestroy(ci)
    assert nvml_code(lambda: fake.nvmlDeviceGetUUID(mig)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert nvml_code(lambda: fake.nvmlDeviceGetMigDeviceHandleByIndex(device, 0)) == pynvml.NVML_ERROR_NOT_FOUND


def test_attaching_a_process_checks_its_target_and_pid() -> None:
    fake = started(A100)
    device = layout(fake)
    mig_uuid = fake.nvmlDeviceGetUUID(mig_devices(fake, device)[0])
    with pytest.raises(ValueError, match="no GPU or MIG device with UUID 'MIG-nope'"):
        fake.sim_attach_process("MIG-nope", pid=1)
    with pytest.raises(ValueError, match="is in MIG mode"):
        fake.sim_attach_process(fake.state.gpus[0].uuid, pid=1)
    with pytest.raises(ValueError, match="pid must be positive"):
        fake.sim_attach_process(mig_uuid, pid=0)
    fake.sim_attach_process(mig_uuid, pid=1)
    with pytest.raises(ValueError, match="already attached"):
        fake.sim_attach_process(mig_uuid, pid=1)
    with pytest.raises(ValueError, match="pid 2 is not attached"):
        fake.sim_detach_process(2)


def test_sim_controls_name_a_bad_gpu_index_or_gi() -> None:
    fake = started(A100)
    with pytest.raises(ValueError, match="no GPU with index 3"):
        fake.sim_set_client_attached(3, True)
    with pytest.raises(ValueError, match="no GPU instance with ID 4"):
        fake.sim_set_gpu_instance_held(0, 4, True)


def test_pci_info_of_a_mig_device_is_its_parents_uncertain() -> None:
    fake = started(A100)
    device = layout(fake)
    info = fake.nvmlDeviceGetPciInfo(mig_devices(fake, device)[0])
    assert (info.busId, info.pciDeviceId) == ("00000000:18:00.0", 0x20B010DE)
