"""The fake libnvidia-ml.so.1 called through ctypes, as nvml.h defines each call: what real NVML
refuses before the driver sees a call, the library refuses too (NULL pointers, struct versions,
caller-sized buffers), and its answers carry the simulator's values."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from ctypes import byref, c_char_p, c_uint, c_void_p
from pathlib import Path

import pynvml
import pytest

from migagent.catalog import model_by_key
from migagent.sim.fake_nvml import FakeNvml
from tests.integration.fakelib.support import NVML_H_RETURN_CODES, library_env, python

SUCCESS = pynvml.NVML_SUCCESS
UNINITIALIZED = pynvml.NVML_ERROR_UNINITIALIZED
INVALID_ARGUMENT = pynvml.NVML_ERROR_INVALID_ARGUMENT
INSUFFICIENT_SIZE = pynvml.NVML_ERROR_INSUFFICIENT_SIZE
CANARY = 0xDEAD


class GiProfileInfoV3(ctypes.Structure):
    """nvmlGpuInstanceProfileInfo_v3_t from nvml.h: no isP2pSupported, `capabilities` at the end."""

    _fields_ = [
        ("version", c_uint), ("id", c_uint), ("sliceCount", c_uint), ("instanceCount", c_uint),
        ("multiprocessorCount", c_uint), ("copyEngineCount", c_uint), ("decoderCount", c_uint),
        ("encoderCount", c_uint), ("jpegCount", c_uint), ("ofaCount", c_uint),
        ("memorySizeMB", ctypes.c_ulonglong), ("name", ctypes.c_char * 96), ("capabilities", c_uint),
    ]  # fmt: skip


def _version(struct: type[ctypes.Structure], version: int) -> int:
    return ctypes.sizeof(struct) | version << 24  # NVML_STRUCT_VERSION


def _device(nvml: ctypes.CDLL, index: int = 0) -> c_void_p:
    handle = c_void_p()
    assert nvml.nvmlDeviceGetHandleByIndex_v2(c_uint(index), byref(handle)) == SUCCESS
    return handle


@pytest.fixture
def initialised(nvml: ctypes.CDLL, node: FakeNvml) -> ctypes.CDLL:
    assert nvml.nvmlInit_v2() == SUCCESS
    return nvml


def test_calls_before_nvml_init_and_after_the_last_shutdown_are_uninitialized(
    nvml: ctypes.CDLL, node: FakeNvml
) -> None:
    count = c_uint(99)
    assert nvml.nvmlDeviceGetCount_v2(byref(count)) == UNINITIALIZED
    assert nvml.nvmlInit_v2() == SUCCESS
    assert nvml.nvmlInitWithFlags(c_uint(0)) == SUCCESS
    assert nvml.nvmlShutdown() == SUCCESS
    assert nvml.nvmlDeviceGetCount_v2(byref(count)) == SUCCESS, "reference counted: one init still holds"
    assert count.value == 2
    assert nvml.nvmlShutdown() == SUCCESS
    assert nvml.nvmlDeviceGetCount_v2(byref(count)) == UNINITIALIZED


@pytest.mark.parametrize("code", NVML_H_RETURN_CODES)
def test_nvml_error_string_names_every_nvml_h_return_code_as_nvml_does(nvml: ctypes.CDLL, code: int) -> None:
    nvml.nvmlErrorString.restype = c_char_p
    text = nvml.nvmlErrorString(code).decode()
    known = pynvml.NVMLError._errcode_to_string.get(code)  # NVML's own texts, as pynvml carries them
    if code == SUCCESS:
        assert text == "Success"
    elif known is not None:
        assert text == known
    else:
        assert text
        assert text != "Unknown Error" or code == pynvml.NVML_ERROR_UNKNOWN
    assert nvml.nvmlErrorString(12345) == b"Unknown Error"


def test_null_output_pointers_are_invalid_argument_where_nvml_h_does_not_allow_them(initialised: ctypes.CDLL) -> None:
    nvml = initialised
    device, count = _device(nvml), c_uint(0)
    assert nvml.nvmlDeviceGetCount_v2(None) == INVALID_ARGUMENT
    assert nvml.nvmlDeviceGetHandleByIndex_v2(c_uint(0), None) == INVALID_ARGUMENT
    assert nvml.nvmlDeviceGetMigMode(device, None, byref(count)) == INVALID_ARGUMENT
    assert nvml.nvmlDeviceGetGpuInstances(device, c_uint(0), None, byref(count)) == INVALID_ARGUMENT
    assert nvml.nvmlDeviceCreateGpuInstanceWithPlacement(device, c_uint(0), None, byref(c_void_p())) == INVALID_ARGUMENT
    assert nvml.nvmlDeviceGetName(device, None, c_uint(96)) == INVALID_ARGUMENT


def test_possible_placements_take_null_to_ask_for_the_count_as_nvml_h_allows(
    initialised: ctypes.CDLL, node: FakeNvml
) -> None:
    nvml, count = initialised, c_uint(0)
    one_g = model_by_key("A100-80GB").profiles.gi_profiles[0]
    assert nvml.nvmlDeviceGetGpuInstancePossiblePlacements_v2(_device(nvml), one_g.id, None, byref(count)) == SUCCESS
    assert count.value == len(one_g.placements)
    placements = (pynvml.c_nvmlGpuInstancePlacement_t * count.value)()
    assert nvml.nvmlDeviceGetGpuInstancePossiblePlacements_v2(_device(nvml), one_g.id, placements, byref(count)) == 0
    assert sorted((p.start, p.size) for p in placements) == sorted((p.start, p.size) for p in one_g.placements)


def test_versioned_profile_info_refuses_a_struct_whose_version_field_is_not_set(initialised: ctypes.CDLL) -> None:
    nvml = initialised
    unset = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
    unset.version = 0
    assert nvml.nvmlDeviceGetGpuInstanceProfileInfoV(_device(nvml), 0, byref(unset)) == INVALID_ARGUMENT
    assert (unset.id, unset.sliceCount) == (0, 0), "nothing written into a refused struct"
    v2 = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()  # pynvml sets nvmlGpuInstanceProfileInfo_v2
    assert v2.version == _version(pynvml.c_nvmlGpuInstanceProfileInfo_v2_t, 2)
    assert nvml.nvmlDeviceGetGpuInstanceProfileInfoV(_device(nvml), 0, byref(v2)) == SUCCESS
    expected = model_by_key("A100-80GB").profiles.gi_profile_by_enum(0)
    assert expected is not None
    assert (v2.id, v2.sliceCount, v2.memorySizeMB) == (expected.id, expected.slices, expected.memory_mb)


def test_profile_info_v3_is_written_in_the_v3_layout(initialised: ctypes.CDLL) -> None:
    nvml = initialised
    v2, v3 = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t(), GiProfileInfoV3(version=_version(GiProfileInfoV3, 3))
    assert nvml.nvmlDeviceGetGpuInstanceProfileInfoV(_device(nvml), 2, byref(v2)) == SUCCESS
    assert nvml.nvmlDeviceGetGpuInstanceProfileInfoV(_device(nvml), 2, byref(v3)) == SUCCESS
    fields = ("id", "sliceCount", "instanceCount", "multiprocessorCount", "decoderCount", "memorySizeMB")
    assert [getattr(v3, f) for f in fields] == [getattr(v2, f) for f in fields]
    assert v3.name.decode() == v2.name


def _enumerate(query: Callable[[int], tuple[int, int, int]]) -> dict[int, int]:
    """Profile id -> slices for enums 0, 1, ... until NVML answers INVALID_ARGUMENT."""
    seen: dict[int, int] = {}
    for enum in range(64):
        rc, profile_id, slices = query(enum)
        if rc == INVALID_ARGUMENT:
            return seen
        assert rc in (SUCCESS, pynvml.NVML_ERROR_NOT_SUPPORTED), f"enum {enum}: {rc}"
        if rc == SUCCESS:
            seen[profile_id] = slices
    pytest.fail("profile enumeration never ended with INVALID_ARGUMENT")


def test_gi_and_ci_profiles_enumerate_until_invalid_argument_as_nvml_h_says(initialised: ctypes.CDLL) -> None:
    nvml = initialised
    device = _device(nvml)
    table = model_by_key("A100-80GB").profiles

    def gi_query(enum: int) -> tuple[int, int, int]:
        info = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
        return nvml.nvmlDeviceGetGpuInstanceProfileInfoV(device, enum, byref(info)), info.id, info.sliceCount

    assert _enumerate(gi_query) == {p.id: p.slices for p in table.gi_profiles}
    whole = max(table.gi_profiles, key=lambda p: p.slices)
    gi = c_void_p()
    assert nvml.nvmlDeviceCreateGpuInstance(device, whole.id, byref(gi)) == SUCCESS

    def ci_query(enum: int) -> tuple[int, int, int]:
        info = pynvml.c_nvmlComputeInstanceProfileInfo_v2_t()
        return nvml.nvmlGpuInstanceGetComputeInstanceProfileInfoV(gi, enum, 0, byref(info)), info.id, info.sliceCount

    assert _enumerate(ci_query) == {p.id: p.slices for p in whole.ci_profiles}
    smallest = min(whole.ci_profiles, key=lambda p: p.slices)
    count = c_uint(0)
    query = nvml.nvmlGpuInstanceGetComputeInstancePossiblePlacements
    assert query(gi, smallest.id, None, byref(count)) == SUCCESS
    placements = (pynvml.c_nvmlComputeInstancePlacement_t * count.value)()
    assert query(gi, smallest.id, placements, byref(count)) == SUCCESS
    assert [(p.start, p.size) for p in placements] == [(p.start, p.size) for p in smallest.placements]
    remaining = c_uint(0)
    assert nvml.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, smallest.id, byref(remaining)) == SUCCESS
    assert remaining.value == smallest.max_instances


def test_process_lists_are_caller_sized_and_a_short_buffer_is_never_written_past(
    initialised: ctypes.CDLL, node: FakeNvml
) -> None:
    nvml = initialised
    gpu = node.state.gpus[0]
    gpu.mig_current = gpu.mig_pending = 0
    for pid in (101, 102, 103):
        node.sim_attach_process(gpu.uuid, pid=pid, used_memory_bytes=pid * 1024)
    call = nvml.nvmlDeviceGetComputeRunningProcesses_v3
    count = c_uint(0)
    assert call(_device(nvml), byref(count), None) == INSUFFICIENT_SIZE
    assert count.value == 3, "the needed count comes back"
    infos = (pynvml.c_nvmlProcessInfo_v2_t * 4)(*[pynvml.c_nvmlProcessInfo_v2_t(pid=CANARY)] * 4)
    count = c_uint(2)
    assert call(_device(nvml), byref(count), infos) == INSUFFICIENT_SIZE
    assert count.value == 3
    assert [i.pid for i in infos] == [CANARY] * 4, "a refused call writes nothing"
    count = c_uint(4)
    assert call(_device(nvml), byref(count), infos) == SUCCESS
    assert count.value == 3
    assert [(i.pid, i.usedGpuMemory) for i in infos[:3]] == [(101, 103424), (102, 104448), (103, 105472)]
    assert infos[3].pid == CANARY, "nothing past the processes found"
    assert call(_device(nvml), None, infos) == INVALID_ARGUMENT


def test_string_outputs_refuse_a_buffer_too_short_for_the_text_and_its_nul(initialised: ctypes.CDLL) -> None:
    nvml = initialised
    name = ctypes.create_string_buffer(96)
    assert nvml.nvmlDeviceGetName(_device(nvml), name, c_uint(8)) == INSUFFICIENT_SIZE
    assert nvml.nvmlDeviceGetName(_device(nvml), name, c_uint(96)) == SUCCESS
    assert name.value.decode() == model_by_key("A100-80GB").name


def test_a_placement_passed_by_value_is_not_taken_for_a_pointer(fake_nvml_dir: Path, tmp_path: Path) -> None:
    """pynvml forwards `placement` as given; a struct by value is garbage where nvml.h wants a pointer.
    The call must not create the GI the caller meant (real NVML would fault or refuse)."""
    state = tmp_path / "node.json"
    FakeNvml.from_spec("A100-80GB", mig_enabled=True).save(state)
    code = (
        "import pynvml\n"
        "pynvml.nvmlInit()\n"
        "device = pynvml.nvmlDeviceGetHandleByIndex(0)\n"
        "placement = pynvml.c_nvmlGpuInstancePlacement_t(0, 4)\n"
        "pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(device, 5, placement)\n"
    )
    result = python(library_env(fake_nvml_dir, state), code)
    assert result.returncode != 0
    assert FakeNvml.load(state).state.gpus[0].gpu_instances == []
