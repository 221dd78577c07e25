"""`nvml_for(fake)`: what the apply and agent suites hand GpuDriver. Plain runs get the FakeNvml;
with MIGAGENT_TEST_NVML_LIBRARY set (the .ci/run step, with LD_LIBRARY_PATH naming the built
library) they get the real pynvml module, whose calls reach the same FakeNvml through the C library."""

from __future__ import annotations

import pynvml
import pytest

from migagent.nvml.driver import GpuDriver
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner
from migagent_sim.fakelib.backend import bind, library_selected, nvml_for


def test_nvml_for_selects_the_fake_or_pynvml_over_the_library_as_the_environment_says() -> None:
    fake = FakeNvml.from_spec("A100-80GB", mig_enabled=True)
    lib = nvml_for(fake)
    try:
        if not library_selected():
            assert lib is fake
            return
        assert lib is pynvml
        with GpuDriver(lib, reset_runner=SimResetRunner(fake)) as driver:
            assert driver.observe().gpus[0].uuid == fake.state.gpus[0].uuid
            assert str(pynvml.nvmlLib._name).endswith("libnvidia-ml.so.1")
            # A fault injected into the test's FakeNvml reaches pynvml: the calls go through it.
            fake.sim_inject_fault("nvmlDeviceGetCount", pynvml.NVML_ERROR_GPU_IS_LOST)
            with pytest.raises(pynvml.NVMLError_GpuIsLost):
                pynvml.nvmlDeviceGetCount()
    finally:
        bind(None)
