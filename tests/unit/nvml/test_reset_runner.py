"""`NvidiaSmiResetRunner` through a fake `run` callable (our own seam; subprocess is not mocked)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from migagent.errors import InUseError, NotSupportedError, PermanentError, TransientError
from migagent.nvml.reset import NvidiaSmiResetRunner

BUS = "00000000:07:00.0"


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: str | None = ""
    stderr: str | None = ""


@dataclass
class RecordingRun:
    result: Completed
    calls: list[list[str]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.calls.append(list(argv))
        return self.result


def test_a_reset_runs_nvidia_smi_for_exactly_that_one_gpu() -> None:
    run = RecordingRun(Completed(0, "GPU 00000000:07:00.0 was successfully reset.\n"))
    NvidiaSmiResetRunner(run=run).reset(BUS)
    assert run.calls == [["nvidia-smi", "-r", "-i", BUS]]


@pytest.mark.parametrize(
    "output",
    [
        "In use by another client",
        "Unable to reset this GPU because it's being used by some other process (e.g. CUDA application)",
    ],
)
def test_a_reset_refused_because_the_gpu_is_busy_raises_in_use(output: str) -> None:
    run = RecordingRun(Completed(255, stdout=output))
    with pytest.raises(InUseError) as caught:
        NvidiaSmiResetRunner(run=run).reset(BUS)
    assert BUS in str(caught.value)
    assert output in str(caught.value)


@pytest.mark.parametrize("output", ["Resetting GPU 00000000:07:00.0 is not supported.", "GPU reset: Not Supported"])
def test_a_reset_the_platform_cannot_do_raises_not_supported(output: str) -> None:
    run = RecordingRun(Completed(3, stderr=output))
    with pytest.raises(NotSupportedError, match="reboot"):
        NvidiaSmiResetRunner(run=run).reset(BUS)


def test_any_other_failure_is_permanent_and_quotes_the_output_and_exit_status() -> None:
    run = RecordingRun(Completed(1, stdout="", stderr="Insufficient Permissions\n"))
    with pytest.raises(PermanentError) as caught:
        NvidiaSmiResetRunner(run=run).reset(BUS)
    assert type(caught.value) is PermanentError
    assert "exit 1" in str(caught.value)
    assert "Insufficient Permissions" in str(caught.value)


def test_a_failure_without_output_says_so() -> None:
    run = RecordingRun(Completed(9, stdout=None, stderr=None))
    with pytest.raises(PermanentError, match="no output"):
        NvidiaSmiResetRunner(run=run).reset(BUS)


def test_a_missing_nvidia_smi_is_a_permanent_error_from_the_os_error() -> None:
    def run(argv: Sequence[str]) -> Completed:
        raise FileNotFoundError(2, "No such file or directory", argv[0])

    with pytest.raises(PermanentError, match="cannot run") as caught:
        NvidiaSmiResetRunner(run=run, nvidia_smi="/opt/nvidia/bin/nvidia-smi").reset(BUS)
    assert isinstance(caught.value.__cause__, FileNotFoundError)


def test_a_reset_that_times_out_is_transient_because_the_gpu_state_is_unknown() -> None:
    def run(argv: Sequence[str]) -> Completed:
        raise subprocess.TimeoutExpired(list(argv), 120)

    with pytest.raises(TransientError) as caught:
        NvidiaSmiResetRunner(run=run).reset(BUS)
    assert caught.value.delay > 0
    assert "120s" in str(caught.value)
