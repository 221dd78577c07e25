"""MIG mode activation per architecture (docs/nvml.md §4)."""

from __future__ import annotations

import pynvml
import pytest

from migagent.sim import FakeNvml
from tests.unit.sim.helpers import create_gi, gi_profile, nvml_code, reset_like_nvidia_smi, started

ENABLE, DISABLE = pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_DISABLE
SUCCESS, IN_USE = pynvml.NVML_SUCCESS, pynvml.NVML_ERROR_IN_USE


def mode_of(fake: FakeNvml, index: int = 0) -> list[int]:
    """GetMigMode through a fresh handle: an activated mode change leaves the old one stale."""
    return fake.nvmlDeviceGetMigMode(fake.nvmlDeviceGetHandleByIndex(index))


def disabled(spec: str) -> FakeNvml:
    fake = FakeNvml.from_spec(spec)
    fake.nvmlInit()
    return fake


def test_get_mig_mode_returns_a_current_pending_list() -> None:
    fake = disabled("A100-40GB")
    assert fake.nvmlDeviceGetMigMode(fake.nvmlDeviceGetHandleByIndex(0)) == [DISABLE, DISABLE]
    enabled = started("A100-40GB")
    assert enabled.nvmlDeviceGetMigMode(enabled.nvmlDeviceGetHandleByIndex(0)) == [ENABLE, ENABLE]


def test_ampere_with_a_client_attached_returns_in_use_and_activates_only_on_reset() -> None:
    fake = disabled("A100-40GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    fake.sim_set_client_attached(0, True)
    assert fake.nvmlDeviceSetMigMode(device, ENABLE) == IN_USE
    assert fake.nvmlDeviceGetMigMode(device) == [DISABLE, ENABLE]
    fake.sim_set_client_attached(0, False)
    reset_like_nvidia_smi(fake, "00000000:18:00.0")
    assert fake.nvmlDeviceGetMigMode(fake.nvmlDeviceGetHandleByIndex(0)) == [ENABLE, ENABLE]


def test_ampere_stays_pending_until_an_explicit_reset_by_default_even_when_idle() -> None:
    fake = disabled("A30-24GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.nvmlDeviceSetMigMode(device, ENABLE) == SUCCESS
    assert fake.nvmlDeviceGetMigMode(device) == [DISABLE, ENABLE]
    assert nvml_code(lambda: fake.nvmlDeviceCreateGpuInstance(device, 0)) == pynvml.NVML_ERROR_NOT_SUPPORTED


def test_ampere_with_auto_reset_activates_at_once_when_idle() -> None:
    fake = disabled("A100-40GB")
    fake.sim_set_ampere_auto_reset(0, True)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.nvmlDeviceSetMigMode(device, ENABLE) == SUCCESS
    assert mode_of(fake) == [ENABLE, ENABLE]


def test_ampere_with_auto_reset_but_a_client_attached_stays_pending_with_in_use() -> None:
    fake = disabled("A100-40GB")
    fake.sim_set_ampere_auto_reset(0, True)
    fake.sim_set_client_attached(0, True)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.nvmlDeviceSetMigMode(device, ENABLE) == IN_USE
    assert fake.nvmlDeviceGetMigMode(device) == [DISABLE, ENABLE]


def test_ampere_with_auto_reset_and_a_running_process_stays_pending_with_in_use() -> None:
    fake = disabled("A100-40GB")
    fake.sim_set_ampere_auto_reset(0, True)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    fake.sim_attach_process(fake.nvmlDeviceGetUUID(device), pid=10)
    assert fake.nvmlDeviceSetMigMode(device, ENABLE) == IN_USE
    assert fake.nvmlDeviceGetMigMode(device) == [DISABLE, ENABLE]


def test_ampere_in_a_passthrough_vm_needs_a_reboot() -> None:
    fake = disabled("A100-40GB")
    fake.sim_set_reset_supported(0, False)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.nvmlDeviceSetMigMode(device, ENABLE) == pynvml.NVML_ERROR_RESET_REQUIRED
    assert fake.nvmlDeviceGetMigMode(device) == [DISABLE, ENABLE]
    with pytest.raises(pynvml.NVMLError_NotSupported):
        fake.sim_reset_gpu("00000000:18:00.0")
    fake.sim_reboot()
    fake.nvmlInit()
    assert fake.nvmlDeviceGetMigMode(fake.nvmlDeviceGetHandleByIndex(0)) == [ENABLE, ENABLE]


@pytest.mark.parametrize("spec", ["H100-80GB-SXM", "H200-141GB", "B200-180GB"])
def test_hopper_and_later_switch_immediately_when_idle(spec: str) -> None:
    fake = disabled(spec)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.nvmlDeviceSetMigMode(device, ENABLE) == SUCCESS
    assert mode_of(fake) == [ENABLE, ENABLE]
    assert fake.nvmlDeviceSetMigMode(fake.nvmlDeviceGetHandleByIndex(0), DISABLE) == SUCCESS
    assert mode_of(fake) == [DISABLE, DISABLE]


def test_hopper_with_a_client_attached_stays_pending_with_in_use_until_retried_idle() -> None:
    fake = disabled("H100-80GB-SXM")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    fake.sim_set_client_attached(0, True)
    assert fake.nvmlDeviceSetMigMode(device, ENABLE) == IN_USE
    assert fake.nvmlDeviceGetMigMode(device) == [DISABLE, ENABLE]
    fake.sim_set_client_attached(0, False)
    assert fake.nvmlDeviceSetMigMode(device, ENABLE) == SUCCESS
    assert mode_of(fake) == [ENABLE, ENABLE]


def test_an_activated_mode_change_leaves_every_handle_of_that_gpu_stale_strict_reading_of_nvml_h() -> None:
    fake = disabled("2xH100-80GB-SXM")
    device, other = fake.nvmlDeviceGetHandleByIndex(0), fake.nvmlDeviceGetHandleByIndex(1)
    assert fake.nvmlDeviceSetMigMode(device, ENABLE) == SUCCESS
    assert nvml_code(lambda: fake.nvmlDeviceGetMigMode(device)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert fake.nvmlDeviceGetMigMode(other) == [DISABLE, DISABLE]
    assert mode_of(fake) == [ENABLE, ENABLE]


def test_a_mode_change_left_pending_keeps_the_handle_valid() -> None:
    fake = disabled("A100-40GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.nvmlDeviceSetMigMode(device, ENABLE) == SUCCESS
    assert fake.nvmlDeviceGetMigMode(device) == [DISABLE, ENABLE]


def test_hopper_with_a_running_process_stays_pending_with_in_use() -> None:
    fake = disabled("H100-80GB-SXM")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    fake.sim_attach_process(fake.nvmlDeviceGetUUID(device), pid=5)
    assert fake.nvmlDeviceSetMigMode(device, ENABLE) == IN_USE
    assert fake.nvmlDeviceGetMigMode(device) == [DISABLE, ENABLE]


def test_hopper_in_a_passthrough_vm_still_switches_without_a_reset() -> None:
    fake = disabled("H100-80GB-SXM")
    fake.sim_set_reset_supported(0, False)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.nvmlDeviceSetMigMode(device, ENABLE) == SUCCESS
    assert mode_of(fake) == [ENABLE, ENABLE]


@pytest.mark.parametrize("spec", ["A100-40GB", "H100-80GB-SXM"])
def test_disabling_mig_while_gpu_instances_exist_raises_in_use_uncertain(spec: str) -> None:
    fake = started(spec)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    create_gi(fake, device, gi_profile(spec, "7g.40gb" if spec == "A100-40GB" else "7g.80gb").id, 0, 8)
    with pytest.raises(pynvml.NVMLError_InUse):
        fake.nvmlDeviceSetMigMode(device, DISABLE)
    assert fake.nvmlDeviceGetMigMode(device) == [ENABLE, ENABLE]


def test_setting_the_current_mode_again_succeeds_and_cancels_a_pending_change() -> None:
    fake = disabled("A100-40GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    fake.nvmlDeviceSetMigMode(device, ENABLE)
    assert fake.nvmlDeviceSetMigMode(device, DISABLE) == SUCCESS
    assert fake.nvmlDeviceGetMigMode(device) == [DISABLE, DISABLE]


def test_set_mig_mode_rejects_an_unknown_mode_and_a_mig_device_handle() -> None:
    fake = started("A30-24GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert nvml_code(lambda: fake.nvmlDeviceSetMigMode(device, 2)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    gi = fake.nvmlDeviceCreateGpuInstance(device, 0)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 3)
    mig = fake.nvmlDeviceGetMigDeviceHandleByIndex(device, 0)
    assert nvml_code(lambda: fake.nvmlDeviceSetMigMode(mig, DISABLE)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert nvml_code(lambda: fake.nvmlDeviceGetMigMode(mig)) == pynvml.NVML_ERROR_NOT_SUPPORTED
