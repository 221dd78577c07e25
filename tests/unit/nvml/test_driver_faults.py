"""Injected NVML faults on every mutating call (and some reads) surface classified, naming GPU and call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pynvml
import pytest

from migagent.catalog import Placement
from migagent.errors import (
    InsufficientResourcesError,
    InUseError,
    MigAgentError,
    NoPermissionError,
    NotSupportedError,
    PermanentError,
    ResetRequiredError,
    TransientError,
)
from migagent.nvml import GpuDriver
from migagent.sim import FakeNvml
from migagent.sim.state import SimProcess
from tests.unit.nvml.conftest import DriverFactory


@dataclass(frozen=True)
class Node:
    """An A100 with a 3g GI (one 1c CI at 0:1) and an empty 1g GI at slice 6."""

    fake: FakeNvml
    driver: GpuDriver
    three_g: int
    one_g: int
    ci: int


@pytest.fixture
def node(open_driver: DriverFactory) -> Node:
    fake = FakeNvml.from_spec("A100-40GB", mig_enabled=True)
    driver = open_driver(fake)
    three_g = driver.create_gpu_instance(0, profile_id=9, placement=Placement(0, 4))
    ci = driver.create_compute_instance(0, gi_id=three_g, profile_id=0, placement=Placement(0, 1))
    one_g = driver.create_gpu_instance(0, profile_id=19, placement=Placement(6, 1))
    fake.sim_mutations = []
    return Node(fake, driver, three_g, one_g, ci)


MUTATIONS: dict[str, Callable[[Node], object]] = {
    "nvmlDeviceSetMigMode": lambda n: n.driver.set_mig_mode(0, enabled=True),
    "nvmlDeviceCreateGpuInstanceWithPlacement": lambda n: n.driver.create_gpu_instance(
        0, profile_id=14, placement=Placement(4, 2)
    ),
    "nvmlGpuInstanceCreateComputeInstance": lambda n: n.driver.create_compute_instance(
        0, gi_id=n.three_g, profile_id=0
    ),
    "nvmlGpuInstanceCreateComputeInstanceWithPlacement": lambda n: n.driver.create_compute_instance(
        0, gi_id=n.three_g, profile_id=0, placement=Placement(2, 1)
    ),
    "nvmlComputeInstanceDestroy": lambda n: n.driver.destroy_compute_instance(0, gi_id=n.three_g, ci_id=n.ci),
    "nvmlGpuInstanceDestroy": lambda n: n.driver.destroy_gpu_instance(0, gi_id=n.one_g),
}

ERRORS: list[tuple[int, type[MigAgentError]]] = [
    (pynvml.NVML_ERROR_IN_USE, InUseError),
    (pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES, InsufficientResourcesError),
    (pynvml.NVML_ERROR_RESET_REQUIRED, ResetRequiredError),
    (pynvml.NVML_ERROR_NOT_SUPPORTED, NotSupportedError),
    (pynvml.NVML_ERROR_TIMEOUT, TransientError),
    (pynvml.NVML_ERROR_UNKNOWN, TransientError),
    (pynvml.NVML_ERROR_NO_PERMISSION, NoPermissionError),
    (pynvml.NVML_ERROR_GPU_IS_LOST, PermanentError),
]


@pytest.mark.parametrize("function", sorted(MUTATIONS))
@pytest.mark.parametrize(("code", "expected"), ERRORS)
def test_a_fault_on_a_mutating_call_is_classified_named_and_changes_nothing(
    node: Node, function: str, code: int, expected: type[MigAgentError]
) -> None:
    before = node.driver.observe()
    node.fake.sim_inject_fault(function, code)

    with pytest.raises(expected) as caught:
        MUTATIONS[function](node)

    assert type(caught.value) is expected
    message = str(caught.value)
    assert f"GPU 0 ({node.fake.state.gpus[0].pci_bus_id})" in message
    assert function in message
    assert f"({code})" in message
    assert isinstance(caught.value.__cause__, pynvml.NVMLError)
    assert caught.value.__cause__.value == code
    assert node.fake.sim_mutations == []
    assert node.driver.observe() == before


@pytest.mark.parametrize("function", sorted(MUTATIONS))
def test_a_one_off_fault_clears_and_the_same_call_then_succeeds(node: Node, function: str) -> None:
    node.fake.sim_inject_fault(function, pynvml.NVML_ERROR_TIMEOUT)
    with pytest.raises(TransientError):
        MUTATIONS[function](node)

    MUTATIONS[function](node)

    assert node.fake.sim_mutations == [function]


def test_a_mig_mode_read_that_times_out_makes_observe_transient(node: Node) -> None:
    node.fake.sim_inject_fault("nvmlDeviceGetMigMode", pynvml.NVML_ERROR_TIMEOUT)
    with pytest.raises(TransientError, match="nvmlDeviceGetMigMode failed with NVML_ERROR_TIMEOUT"):
        node.driver.observe()


def test_a_process_list_nvml_refuses_is_an_error_never_an_empty_list(node: Node) -> None:
    node.fake.sim_inject_fault("nvmlDeviceGetComputeRunningProcesses", pynvml.NVML_ERROR_NO_PERMISSION)
    with pytest.raises(PermanentError, match="NVML_ERROR_NO_PERMISSION"):
        node.driver.observe()


def test_a_lost_gpu_during_instance_listing_is_permanent_and_names_the_call(node: Node) -> None:
    node.fake.sim_inject_fault("nvmlDeviceGetGpuInstances", pynvml.NVML_ERROR_GPU_IS_LOST)
    with pytest.raises(PermanentError, match=r"nvmlDeviceGetGpuInstances\(profile \d+\).*GPU_IS_LOST"):
        node.driver.observe()


def test_a_gpu_whose_mig_mode_query_is_not_supported_is_observed_as_not_mig_capable(node: Node) -> None:
    node.fake.sim_inject_fault("nvmlDeviceGetMigMode", pynvml.NVML_ERROR_NOT_SUPPORTED, times=None)

    gpu = node.driver.observe().gpu(0)

    assert (gpu.mig_capable, gpu.mig_current, gpu.profiles, gpu.gpu_instances) == (False, False, None, ())
    with pytest.raises(NotSupportedError, match="not MIG capable"):
        node.driver.profile_table(0)


def test_failing_to_open_nvml_is_classified_for_the_node() -> None:
    fake = FakeNvml.from_spec("A30-24GB")
    fake.sim_inject_fault("nvmlInit", pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    with pytest.raises(PermanentError, match="node: nvmlInit failed with NVML_ERROR_DRIVER_NOT_LOADED"):
        GpuDriver(fake, reset_runner=_NoReset()).__enter__()


class _NoReset:
    def reset(self, pci_bus_id: str) -> None:
        raise AssertionError(f"no reset expected, got {pci_bus_id}")


def test_a_driver_without_the_v3_process_call_is_observed_through_the_v2_call(node: Node) -> None:
    gi = node.fake.state.gpus[0].gpu_instance(node.three_g)
    assert gi is not None
    node.fake.sim_attach_process(gi.compute_instances[0].uuid, pid=77, used_memory_bytes=1 << 20)
    node.fake.sim_inject_fault(
        "nvmlDeviceGetComputeRunningProcesses", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, times=None
    )

    observed = node.driver.observe().gpu(0).gi_at(Placement(0, 4))

    assert observed is not None
    assert [(p.pid, p.used_memory_bytes) for p in observed.compute_instances[0].processes] == [(77, 1 << 20)]


def test_when_neither_process_call_exists_the_observation_fails_naming_the_older_call(node: Node) -> None:
    for call in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2"):
        node.fake.sim_inject_fault(call, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, times=None)

    with pytest.raises(NotSupportedError, match="nvmlDeviceGetComputeRunningProcesses_v2"):
        node.driver.observe()


def test_a_process_whose_memory_nvml_cannot_tell_is_observed_as_using_none_and_still_named(node: Node) -> None:
    """nvml.h: usedGpuMemory may be NVML_VALUE_NOT_AVAILABLE (pynvml: None), e.g. without the privilege
    to read another container's usage; the process is still there and must block a destroy."""
    gi = node.fake.state.gpus[0].gpu_instance(node.three_g)
    assert gi is not None
    node.fake.sim_attach_process(gi.compute_instances[0].uuid, pid=78, used_memory_bytes=None)
    raw = node.fake.nvmlDeviceGetComputeRunningProcesses(node.fake.nvmlDeviceGetHandleByIndex(0))
    assert [p.usedGpuMemory for p in raw] == [None]

    observed = node.driver.observe().gpu(0).gi_at(Placement(0, 4))

    assert observed is not None
    assert [(p.pid, p.used_memory_bytes) for p in observed.compute_instances[0].processes] == [(78, 0)]


def test_a_process_memory_nvml_cannot_tell_survives_the_state_file() -> None:
    saved = SimProcess(pid=79, used_memory_bytes=None).to_dict()
    assert SimProcess.from_dict(saved).used_memory_bytes is None


def test_fake_nvml_raises_what_pynvml_raises_for_an_unversioned_call_the_driver_lacks(node: Node) -> None:
    """pynvml's throwOnVersionMismatch: NVMLLibraryMismatchError, which is not an NVMLError."""
    node.fake.sim_inject_fault(
        "nvmlDeviceGetComputeRunningProcesses", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, times=None
    )
    node.fake.nvmlInit()
    try:
        with pytest.raises(pynvml.NVMLLibraryMismatchError):
            node.fake.nvmlDeviceGetComputeRunningProcesses(node.fake.nvmlDeviceGetHandleByIndex(0))
    finally:
        node.fake.nvmlShutdown()
