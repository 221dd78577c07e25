"""NvmlLib lists pynvml functions; the real module (untyped, so unchecked by mypy) must provide them all."""

from __future__ import annotations

import inspect

import pynvml
import pytest

from migagent.errors import PermanentError, TransientError
from migagent.nvml import GpuDriver, NvmlLib
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner

FUNCTIONS = sorted(name for name in dir(NvmlLib) if name.startswith("nvml"))


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("implementation", [pynvml, FakeNvml], ids=["pynvml", "FakeNvml"])
def test_every_function_the_driver_calls_exists_with_a_compatible_arity(implementation: object, name: str) -> None:
    expected = len(inspect.signature(getattr(NvmlLib, name)).parameters) - 1  # without self
    function = getattr(implementation, name)
    parameters = [p for p in inspect.signature(function).parameters.values() if p.name != "self"]
    required = [p for p in parameters if p.default is inspect.Parameter.empty]
    assert len(required) <= expected <= len(parameters)


def test_a_failing_shutdown_is_reported_when_nothing_else_failed() -> None:
    fake = FakeNvml.from_spec("A30-24GB")
    fake.sim_inject_fault("nvmlShutdown", pynvml.NVML_ERROR_UNKNOWN)
    with pytest.raises(TransientError, match="nvmlShutdown"), GpuDriver(fake, reset_runner=SimResetRunner(fake)):
        pass


def test_a_failing_shutdown_does_not_hide_the_error_that_ended_the_block() -> None:
    fake = FakeNvml.from_spec("A30-24GB", mig_enabled=True)
    fake.sim_inject_fault("nvmlShutdown", pynvml.NVML_ERROR_UNKNOWN)
    with pytest.raises(PermanentError, match="GPU instance 3 does not exist"):  # noqa: SIM117
        with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
            driver.destroy_gpu_instance(0, gi_id=3)
