"""GpuDriver runs on the simulator's FakeNvml (pynvml's own surface), reset through SimResetRunner."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from migagent.nvml import GpuDriver
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner

DriverFactory = Callable[[FakeNvml], GpuDriver]


@pytest.fixture
def open_driver() -> Iterator[DriverFactory]:
    """Open (nvmlInit) a driver over a fake; every driver opened is shut down after the test."""
    opened: list[GpuDriver] = []

    def factory(fake: FakeNvml) -> GpuDriver:
        driver = GpuDriver(fake, reset_runner=SimResetRunner(fake))
        opened.append(driver.__enter__())
        return driver

    yield factory
    for driver in reversed(opened):
        driver.__exit__(None, None, None)
