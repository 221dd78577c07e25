"""NVML failures during an apply: transient ones are retried, permanent ones fail clearly and are journaled."""

from collections.abc import Callable

import pynvml
import pytest
from structlog.testing import capture_logs

from migagent.reconcile.machine import ApplyOutcome
from migagent.reconcile.states import Phase
from tests.integration.apply.support import SimNode

MakeNode = Callable[[str], SimNode]

# Each mutating NVML call, with a transition that makes it (on an A100, from `start` to `target`).
CALLS = {
    "nvmlDeviceSetMigMode": (None, "a100-balanced"),
    "nvmlDeviceCreateGpuInstanceWithPlacement": (None, "a100-balanced"),
    "nvmlGpuInstanceCreateComputeInstanceWithPlacement": (None, "a100-balanced"),
    "nvmlComputeInstanceDestroy": ("a100-balanced", "a100-1g"),
    "nvmlGpuInstanceDestroy": ("a100-balanced", "a100-1g"),
}


def _node(make_node: MakeNode, start: str | None) -> SimNode:
    node = make_node("A100-40GB")
    if start is not None:
        with capture_logs():
            assert node.apply(start).converged
    node.fake.sim_mutations = []
    return node


@pytest.mark.parametrize("function", sorted(CALLS))
def test_a_transient_nvml_error_on_a_mutating_call_is_retried_until_it_converges(
    make_node: MakeNode, function: str
) -> None:
    start, target = CALLS[function]
    node = _node(make_node, start)
    node.fake.sim_inject_fault(function, pynvml.NVML_ERROR_TIMEOUT, times=2)
    with capture_logs() as logs:
        result = node.apply(target)
    assert result.converged, result.error
    retries = [e for e in logs if e["event"] == "step_retrying"]
    assert len(retries) == 2
    assert function in retries[0]["error"]
    assert node.clock.sleeps == [5.0, 5.0]  # NVML's TIMEOUT suggests 5 s, more than the 1 s and 2 s back-off


@pytest.mark.parametrize("function", sorted(CALLS))
def test_a_permanent_nvml_error_fails_the_apply_with_the_reason_in_the_journal(
    make_node: MakeNode, function: str
) -> None:
    start, target = CALLS[function]
    node = _node(make_node, start)
    node.fake.sim_inject_fault(function, pynvml.NVML_ERROR_NO_PERMISSION, times=None)
    with capture_logs() as logs:
        result = node.apply(target)
    assert result.outcome is ApplyOutcome.FAILED
    assert result.error is not None
    assert function in result.error
    assert "GPU 0" in result.error
    record = node.journal().load()
    assert record is not None
    assert record.phase is Phase.FAILED
    assert record.last_error == result.error
    assert record.attempts == 1
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["apply_failed"]


def test_a_transient_error_that_never_clears_fails_after_the_configured_attempts(make_node: MakeNode) -> None:
    node = _node(make_node, None)
    node.fake.sim_inject_fault("nvmlDeviceSetMigMode", pynvml.NVML_ERROR_TIMEOUT, times=None)
    with capture_logs():
        result = node.apply("a100-balanced")
    assert result.outcome is ApplyOutcome.FAILED
    assert result.error is not None
    assert "still failing after 4 attempts" in result.error
    assert node.fake.sim_mutations == []


def test_consecutive_failures_are_counted_and_success_resets_the_count(make_node: MakeNode) -> None:
    node = _node(make_node, None)
    node.fake.sim_inject_fault("nvmlDeviceSetMigMode", pynvml.NVML_ERROR_NO_PERMISSION, times=2)
    with capture_logs():
        node.apply("a100-balanced")
        second = node.apply("a100-balanced")
    record = node.journal().load()
    assert record is not None
    assert second.outcome is ApplyOutcome.FAILED
    assert record.attempts == 2
    with capture_logs():
        assert node.apply("a100-balanced").converged
    record = node.journal().load()
    assert record is not None
    assert record.attempts == 0
    assert record.last_error is None


def test_insufficient_resources_mid_apply_re_plans_once_and_converges(make_node: MakeNode) -> None:
    node = _node(make_node, None)
    node.fake.sim_inject_fault(
        "nvmlDeviceCreateGpuInstanceWithPlacement", pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES, times=1
    )
    with capture_logs() as logs:
        result = node.apply("a100-balanced")
    assert result.converged, result.error
    assert [e["event"] for e in logs].count("replanning") == 1


def test_insufficient_resources_again_after_re_planning_fails(make_node: MakeNode) -> None:
    node = _node(make_node, None)
    node.fake.sim_inject_fault(
        "nvmlDeviceCreateGpuInstanceWithPlacement", pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES, times=None
    )
    with capture_logs() as logs:
        result = node.apply("a100-balanced")
    assert result.outcome is ApplyOutcome.FAILED
    assert result.error is not None
    assert "after re-planning" in result.error
    assert [e["event"] for e in logs].count("replanning") == 1


def test_processes_on_a_gi_to_be_destroyed_refuse_the_apply_before_any_mutation(make_node: MakeNode) -> None:
    node = make_node("2xA100-40GB")
    with capture_logs():
        assert node.apply("a100-balanced").converged
    gpu0 = node.observe().gpu(0)
    doomed = next(gi for gi in gpu0.gpu_instances if gi.profile_id != 19)  # a100-1g keeps no 2g/3g GI
    uuid = doomed.compute_instances[0].uuid
    node.fake.sim_attach_process(uuid, pid=4242)
    node.fake.sim_mutations = []
    with capture_logs():
        result = node.apply("a100-1g")
    assert result.outcome is ApplyOutcome.FAILED
    assert result.error is not None
    assert "pid 4242" in result.error
    assert uuid in result.error
    assert "GPU 0" in result.error
    assert node.fake.sim_mutations == []


def test_a_process_on_a_gi_that_stays_does_not_block_the_apply(make_node: MakeNode) -> None:
    node = make_node("A100-40GB")
    with capture_logs():
        assert node.apply("a100-balanced").converged
    kept = next(gi for gi in node.observe().gpu(0).gpu_instances if gi.profile_id == 19)
    node.fake.sim_attach_process(kept.compute_instances[0].uuid, pid=7)
    with capture_logs():
        result = node.apply("a100-1g")
    assert result.converged, result.error
    assert kept.compute_instances[0].uuid in node.mig_uuids(0)


def test_a_process_on_a_whole_gpu_refuses_turning_mig_on_under_it_before_any_mutation(make_node: MakeNode) -> None:
    node = make_node("2xH100-80GB-SXM")
    busy = node.observe().gpu(0)
    node.fake.sim_attach_process(busy.uuid, pid=5151)  # MIG is off: the process holds the whole GPU
    node.fake.sim_mutations = []
    with capture_logs():
        result = node.apply("h100-2x3g")
    assert result.outcome is ApplyOutcome.FAILED
    assert result.error is not None
    assert f"pid 5151 on {busy.uuid} (GPU 0)" in result.error
    assert node.fake.sim_mutations == []
