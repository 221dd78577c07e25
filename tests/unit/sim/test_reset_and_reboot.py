"""GPU reset (nvidia-smi -r), node reboot and the simulator's reset runner (docs/nvml.md §4)."""

from __future__ import annotations

from functools import partial

import pynvml
import pytest

from migagent.errors import InUseError, NotSupportedError, PermanentError
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner
from tests.unit.sim.helpers import gi_profile, nvml_code, reset_like_nvidia_smi, started

BUS0, BUS1 = "00000000:18:00.0", "00000000:19:00.0"


def with_a_mig_device(spec: str = "A100-40GB") -> FakeNvml:
    fake = started(spec)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    gi = fake.nvmlDeviceCreateGpuInstance(device, gi_profile("A100-40GB", "3g.20gb").id)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 2)
    return fake


def test_reset_destroys_every_instance_and_leaves_no_mig_device() -> None:
    fake = with_a_mig_device()
    reset_like_nvidia_smi(fake, BUS0)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.state.gpus[0].gpu_instances == []
    for index in range(fake.nvmlDeviceGetMaxMigDeviceCount(device)):
        assert nvml_code(partial(fake.nvmlDeviceGetMigDeviceHandleByIndex, device, index)) == (
            pynvml.NVML_ERROR_NOT_FOUND
        )


def test_reset_invalidates_every_handle_of_that_gpu_but_not_of_others() -> None:
    fake = started("2xA100-40GB")
    device, other = fake.nvmlDeviceGetHandleByIndex(0), fake.nvmlDeviceGetHandleByIndex(1)
    gi = fake.nvmlDeviceCreateGpuInstance(device, 0)
    ci = fake.nvmlGpuInstanceCreateComputeInstance(gi, 4)
    mig = fake.nvmlDeviceGetMigDeviceHandleByIndex(device, 0)
    reset_like_nvidia_smi(fake, BUS0)
    for call in (
        lambda: fake.nvmlGpuInstanceGetInfo(gi),
        lambda: fake.nvmlComputeInstanceGetInfo(ci),
        lambda: fake.nvmlDeviceGetUUID(mig),
        lambda: fake.nvmlDeviceGetMigMode(device),
    ):
        assert nvml_code(call) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert fake.nvmlDeviceGetMigMode(other) == [1, 1]


def test_a_destroyed_and_recreated_instance_does_not_revive_old_handles() -> None:
    fake = started("A30-24GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    old = fake.nvmlDeviceCreateGpuInstance(device, 0)
    reset_like_nvidia_smi(fake, BUS0)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    fake.nvmlDeviceCreateGpuInstance(device, 0)
    assert nvml_code(lambda: fake.nvmlGpuInstanceGetInfo(old)) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_reset_applies_the_pending_mode() -> None:
    fake = started("H100-80GB-SXM")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    fake.sim_set_client_attached(0, True)
    assert fake.nvmlDeviceSetMigMode(device, 0) == pynvml.NVML_ERROR_IN_USE
    fake.sim_set_client_attached(0, False)
    reset_like_nvidia_smi(fake, BUS0)
    assert fake.nvmlDeviceGetMigMode(fake.nvmlDeviceGetHandleByIndex(0)) == [0, 0]


def test_nvidia_smi_refuses_a_reset_while_this_process_holds_nvml_initialised() -> None:
    fake = with_a_mig_device()
    with pytest.raises(pynvml.NVMLError_InUse):
        fake.sim_reset_gpu(BUS0)
    assert len(fake.state.gpus[0].gpu_instances) == 1


def test_nvidia_smi_refuses_a_reset_until_every_nvml_init_is_balanced_by_a_shutdown() -> None:
    fake = with_a_mig_device()
    fake.nvmlInit()  # a second client in this process: NVML is reference counted
    fake.nvmlShutdown()
    assert fake.sim_nvml_clients == 1
    with pytest.raises(pynvml.NVMLError_InUse):
        fake.sim_reset_gpu(BUS0)
    fake.nvmlShutdown()
    fake.sim_reset_gpu(BUS0)
    assert fake.state.gpus[0].gpu_instances == []


def test_the_sim_reset_runner_names_the_nvml_clients_that_block_a_reset() -> None:
    fake = with_a_mig_device()
    with pytest.raises(InUseError, match=r"NVML is initialised 1 time\(s\) in this process"):
        SimResetRunner(fake).reset(BUS0)


def test_reset_with_a_process_on_a_mig_device_raises_in_use_and_changes_nothing() -> None:
    fake = with_a_mig_device()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    mig_uuid = fake.nvmlDeviceGetUUID(fake.nvmlDeviceGetMigDeviceHandleByIndex(device, 0))
    fake.sim_attach_process(mig_uuid, pid=99)
    with pytest.raises(pynvml.NVMLError_InUse):
        reset_like_nvidia_smi(fake, BUS0)
    assert len(fake.state.gpus[0].gpu_instances) == 1
    assert fake.nvmlDeviceGetUUID(device) == fake.state.gpus[0].uuid


def test_reset_with_a_client_attached_raises_in_use() -> None:
    fake = started()
    fake.sim_set_client_attached(0, True)
    with pytest.raises(pynvml.NVMLError_InUse):
        reset_like_nvidia_smi(fake, BUS0)


def test_reset_while_a_client_holds_a_gpu_instance_raises_in_use() -> None:
    fake = with_a_mig_device()
    fake.sim_set_gpu_instance_held(0, fake.state.gpus[0].gpu_instances[0].id, True)
    with pytest.raises(pynvml.NVMLError_InUse):
        reset_like_nvidia_smi(fake, BUS0)


def test_reset_of_an_unknown_or_malformed_bus_id_fails() -> None:
    fake = started()
    assert nvml_code(lambda: fake.sim_reset_gpu(BUS1)) == pynvml.NVML_ERROR_NOT_FOUND
    assert nvml_code(lambda: fake.sim_reset_gpu("gpu0")) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_a_successful_reset_is_logged_as_a_mutation() -> None:
    fake = started()
    reset_like_nvidia_smi(fake, BUS0)
    assert fake.sim_mutations == ["sim_reset_gpu"]


def test_reboot_keeps_the_ampere_mode_and_disables_mig_on_hopper() -> None:
    fake = started("A100-40GB,H100-80GB-SXM")
    fake.sim_reboot()
    fake.nvmlInit()
    modes = [fake.nvmlDeviceGetMigMode(fake.nvmlDeviceGetHandleByIndex(i)) for i in range(2)]
    assert modes == [[1, 1], [0, 0]]


def test_reboot_destroys_instances_and_processes_and_needs_a_new_nvml_init() -> None:
    fake = with_a_mig_device()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    fake.sim_attach_process(fake.nvmlDeviceGetUUID(fake.nvmlDeviceGetMigDeviceHandleByIndex(device, 0)), pid=3)
    fake.sim_reboot()
    assert nvml_code(fake.nvmlDeviceGetCount) == pynvml.NVML_ERROR_UNINITIALIZED
    fake.nvmlInit()
    assert nvml_code(lambda: fake.nvmlDeviceGetMigMode(device)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert fake.state.gpus[0].gpu_instances == []
    assert fake.nvmlDeviceGetComputeRunningProcesses(fake.nvmlDeviceGetHandleByIndex(0)) == []


def test_reboot_ends_processes_running_on_a_whole_gpu_without_mig() -> None:
    fake = FakeNvml.from_spec("H100-80GB-SXM")
    fake.nvmlInit()
    fake.sim_attach_process(fake.nvmlDeviceGetUUID(fake.nvmlDeviceGetHandleByIndex(0)), pid=5)
    fake.sim_reboot()
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.nvmlDeviceGetComputeRunningProcesses(device) == []
    assert fake.nvmlDeviceSetMigMode(device, 1) == pynvml.NVML_SUCCESS


def test_reboot_keeps_the_simulated_clients_and_settings() -> None:
    fake = started("A100-40GB")
    fake.sim_set_client_attached(0, True)
    fake.sim_set_reset_supported(0, False)
    fake.sim_reboot()
    assert fake.state.gpus[0].client_attached
    assert not fake.state.gpus[0].reset_supported


def test_the_sim_reset_runner_resets_through_the_fake() -> None:
    fake = with_a_mig_device()
    fake.nvmlShutdown()
    SimResetRunner(fake).reset(BUS0)
    assert fake.state.gpus[0].gpu_instances == []


def test_the_sim_reset_runner_turns_in_use_into_in_use_error() -> None:
    fake = started()
    fake.nvmlShutdown()
    fake.sim_set_client_attached(0, True)
    with pytest.raises(InUseError, match=BUS0) as info:
        SimResetRunner(fake).reset(BUS0)
    assert isinstance(info.value.__cause__, pynvml.NVMLError_InUse)


def test_the_sim_reset_runner_turns_not_supported_into_not_supported_error() -> None:
    fake = started()
    fake.sim_set_reset_supported(0, False)
    with pytest.raises(NotSupportedError, match="reboot") as info:
        SimResetRunner(fake).reset(BUS0)
    assert isinstance(info.value.__cause__, pynvml.NVMLError_NotSupported)


def test_the_sim_reset_runner_turns_other_nvml_errors_into_permanent_errors() -> None:
    fake = started()
    with pytest.raises(PermanentError, match=BUS1) as info:
        SimResetRunner(fake).reset(BUS1)
    assert not isinstance(info.value, InUseError | NotSupportedError)
    assert isinstance(info.value.__cause__, pynvml.NVMLError_NotFound)
