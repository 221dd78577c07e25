"""Each NVML function NVIDIA's tools call (nvidia-mig-parted, nvidia-mig-manager, the device plugin,
GPU Feature Discovery: traced with MIGAGENT_FAKE_NVML_TRACE) that the fake library lacked or
answered differently before they ran on it, in a test named after it, through the C ABI as go-nvml
calls it. (tests/judge runs the tools themselves.)"""

from __future__ import annotations

import ctypes
import subprocess
from collections.abc import Iterator
from ctypes import byref, c_int, c_uint, c_ulonglong, c_void_p
from pathlib import Path

import pynvml
import pytest

from migagent.sim.fake_nvml import FakeNvml
from migagent_sim.fakelib.backend import bind
from tests.integration.fakelib.support import library_env

SUCCESS, NOT_SUPPORTED = pynvml.NVML_SUCCESS, pynvml.NVML_ERROR_NOT_SUPPORTED
INVALID_ARGUMENT, TIMEOUT = pynvml.NVML_ERROR_INVALID_ARGUMENT, pynvml.NVML_ERROR_TIMEOUT


class DeviceAttributes(ctypes.Structure):
    _fields_ = [
        *((name, c_uint) for name in (
            "multiprocessorCount", "sharedCopyEngineCount", "sharedDecoderCount", "sharedEncoderCount",
            "sharedJpegCount", "sharedOfaCount", "gpuInstanceSliceCount", "computeInstanceSliceCount",
        )),
        ("memorySizeMB", c_ulonglong),
    ]  # fmt: skip


class EventData(ctypes.Structure):
    _fields_ = [("device", c_void_p), ("eventType", c_ulonglong), ("eventData", c_ulonglong),
                ("gpuInstanceId", c_uint), ("computeInstanceId", c_uint)]  # fmt: skip


@pytest.fixture
def h100(nvml: ctypes.CDLL) -> Iterator[tuple[ctypes.CDLL, FakeNvml]]:
    """An H100 in MIG mode with one 1g.20gb GI holding the driver's default CI, bound in-process."""
    fake = FakeNvml.from_spec("H100-80GB-SXM", mig_enabled=True)
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    gi = fake.nvmlDeviceCreateGpuInstance(device, 15)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 7)
    fake.nvmlShutdown()
    bind(fake)
    assert nvml.nvmlInit_v2() == SUCCESS
    yield nvml, fake
    nvml.nvmlShutdown()
    bind(None)


def _device(nvml: ctypes.CDLL, index: int = 0) -> c_void_p:
    handle = c_void_p()
    assert nvml.nvmlDeviceGetHandleByIndex_v2(c_uint(index), byref(handle)) == SUCCESS
    return handle


def _mig_device(nvml: ctypes.CDLL) -> c_void_p:
    handle = c_void_p()
    assert nvml.nvmlDeviceGetMigDeviceHandleByIndex(_device(nvml), c_uint(0), byref(handle)) == SUCCESS
    return handle


def test_nvmlInit_v2_succeeds_in_a_process_without_python(  # noqa: N802 - named after the NVML function
    nvml_client: Path, fake_nvml_dir: Path, tmp_path: Path
) -> None:
    """Was NVML_ERROR_LIBRARY_NOT_FOUND: the library served only Python processes; go-nvml's is not one."""
    env = library_env(fake_nvml_dir, tmp_path / "node.json", spec="H100-80GB-SXM")
    result = subprocess.run(
        [str(nvml_client), "info"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == SUCCESS, result.stderr


def test_nvmlDeviceGetAttributes_v2_describes_a_mig_device_and_refuses_a_gpu(  # noqa: N802
    h100: tuple[ctypes.CDLL, FakeNvml],
) -> None:
    """Was missing (a call would have killed the device plugin and GFD). nvml.h: MIG device handles only."""
    nvml, _fake = h100
    found = DeviceAttributes()
    assert nvml.nvmlDeviceGetAttributes_v2(_mig_device(nvml), byref(found)) == SUCCESS
    assert (found.gpuInstanceSliceCount, found.computeInstanceSliceCount) == (1, 1)
    assert (found.multiprocessorCount, found.memorySizeMB) == (26, 20096)  # the default CI: the GI's every SM
    assert (found.sharedDecoderCount, found.sharedJpegCount, found.sharedOfaCount) == (1, 1, 0)
    assert nvml.nvmlDeviceGetAttributes_v2(_device(nvml), byref(found)) == NOT_SUPPORTED


def test_nvmlDeviceGetMinorNumber_is_the_gpu_index_of_dev_nvidia_n(h100: tuple[ctypes.CDLL, FakeNvml]) -> None:  # noqa: N802
    """Was missing: the device plugin builds /dev/nvidia<minor> from it."""
    nvml, _fake = h100
    minor = c_uint(99)
    assert nvml.nvmlDeviceGetMinorNumber(_device(nvml), byref(minor)) == SUCCESS
    assert minor.value == 0
    assert nvml.nvmlDeviceGetMinorNumber(_mig_device(nvml), byref(minor)) == NOT_SUPPORTED


def test_nvmlDeviceGetCudaComputeCapability_is_the_chips(h100: tuple[ctypes.CDLL, FakeNvml]) -> None:  # noqa: N802
    """Was missing: GFD's nvidia.com/gpu.compute.major/minor; Hopper is 9.0, a MIG device its parent's."""
    nvml, _fake = h100
    major, minor = c_int(), c_int()
    for handle in (_device(nvml), _mig_device(nvml)):
        assert nvml.nvmlDeviceGetCudaComputeCapability(handle, byref(major), byref(minor)) == SUCCESS
        assert (major.value, minor.value) == (9, 0)


def test_nvmlSystemGetCudaDriverVersion_matches_the_driver_version(h100: tuple[ctypes.CDLL, FakeNvml]) -> None:  # noqa: N802
    """Answered CUDA 12.4 beside a 580 driver; R580 drivers support CUDA 13.0 (GFD's cuda.driver labels)."""
    nvml, fake = h100
    version = c_int()
    assert nvml.nvmlSystemGetCudaDriverVersion_v2(byref(version)) == SUCCESS
    assert version.value == 13000
    assert fake.sim_driver_version.startswith("580.")


def test_nvmlDeviceGetBrand_and_nvmlDeviceGetArchitecture(h100: tuple[ctypes.CDLL, FakeNvml]) -> None:  # noqa: N802
    """Were missing from the library (go-nvlib's GetBrandAsString / GetArchitectureAsString)."""
    nvml, _fake = h100
    value = c_uint()
    assert nvml.nvmlDeviceGetBrand(_device(nvml), byref(value)) == SUCCESS
    assert value.value == pynvml.NVML_BRAND_NVIDIA
    assert nvml.nvmlDeviceGetArchitecture(_device(nvml), byref(value)) == SUCCESS
    assert value.value == pynvml.NVML_DEVICE_ARCH_HOPPER


def test_nvmlEventSetWait_v2_times_out_on_a_healthy_gpu_after_registering_its_xid_events(  # noqa: N802
    h100: tuple[ctypes.CDLL, FakeNvml],
) -> None:
    """Were missing (nvmlEventSetCreate, nvmlDeviceGetSupportedEventTypes, nvmlDeviceRegisterEvents,
    nvmlEventSetWait_v2, nvmlEventSetFree): the device plugin's health check marks a GPU unhealthy
    when they fail, and waits in a loop for NVML_ERROR_TIMEOUT."""
    nvml, _fake = h100
    event_set, supported = c_void_p(), c_ulonglong()
    assert nvml.nvmlEventSetCreate(byref(event_set)) == SUCCESS
    assert nvml.nvmlDeviceGetSupportedEventTypes(_device(nvml), byref(supported)) == SUCCESS
    xid_and_ecc = pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeDoubleBitEccError
    assert supported.value & xid_and_ecc == xid_and_ecc
    assert nvml.nvmlDeviceRegisterEvents(_device(nvml), c_ulonglong(xid_and_ecc), event_set) == SUCCESS
    assert nvml.nvmlDeviceRegisterEvents(_device(nvml), c_ulonglong(1 << 40), event_set) == NOT_SUPPORTED
    data = EventData()
    assert nvml.nvmlEventSetWait_v2(event_set, byref(data), c_uint(10)) == TIMEOUT
    assert nvml.nvmlEventSetFree(event_set) == SUCCESS
    assert nvml.nvmlEventSetWait_v2(None, byref(data), c_uint(10)) == INVALID_ARGUMENT


def test_nvmlDeviceGetGpuFabricInfo_is_not_supported_as_on_a_gpu_without_a_fabric(  # noqa: N802
    h100: tuple[ctypes.CDLL, FakeNvml],
) -> None:
    """Was missing (GFD calls it; go-nvlib reads NOT_SUPPORTED as "not fabric-attached"), as were the
    other nvml.h functions the tools link against and never call here: each answers NOT_SUPPORTED."""
    nvml, _fake = h100
    info = (ctypes.c_char * 512)()
    assert nvml.nvmlDeviceGetGpuFabricInfo(_device(nvml), info) == NOT_SUPPORTED
    assert nvml.nvmlDeviceGetBoardId(_device(nvml), byref(c_uint())) == NOT_SUPPORTED


def test_nvmlGpuInstanceGetComputeInstanceProfileInfo_offers_1_slice_beside_rev1_in_1g_20gb_uncertain(  # noqa: N802
    h100: tuple[ctypes.CDLL, FakeNvml],
) -> None:
    """mig-parted asks a 1g.20gb GI for CI profile 0 (1_SLICE), the first go-nvlib names 1g.20gb; the
    driver's default there is 7 (1_SLICE_REV1). Whether 0 is offered is uncertain, so it is a
    setting (SimNodeState.one_slice_ci_beside_rev1): offered by default, refused when off."""
    nvml, fake = h100
    gi, info = c_void_p(), pynvml.c_nvmlComputeInstanceProfileInfo_t()
    assert (
        nvml.nvmlDeviceGetGpuInstanceById(_device(nvml), c_uint(fake.state.gpus[0].gpu_instances[0].id), byref(gi)) == 0
    )
    for offered, answer in ((True, SUCCESS), (False, NOT_SUPPORTED)):
        fake.sim_set_one_slice_ci_beside_rev1(offered)
        assert nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, c_uint(0), c_uint(0), byref(info)) == answer
    assert nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, c_uint(7), c_uint(0), byref(info)) == SUCCESS
    assert (info.id, info.sliceCount, info.multiprocessorCount) == (7, 1, 26)
