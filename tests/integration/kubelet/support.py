"""Helpers for the fake-kubelet tests: lay out MIG devices, poll, and a clock the test releases."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from migagent.catalog import Placement
from migagent.clock import SystemClock
from migagent.layout.profile import gi_profile_name
from migagent.nvml import GpuDriver
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner
from migagent_sim.deadline import Deadline

T = TypeVar("T")
NODE = "gpu-node-1"


def lay_out(fake: FakeNvml, gpu: int, gis: Iterable[tuple[str, int]], *, ci_slices: int | None = None) -> list[str]:
    """Create GIs (profile name, placement start) on `gpu`, each with one CI; returns the new MIG UUIDs.

    `ci_slices` None gives each GI its full CI; a number gives CIs of that many slices until the GI is full.
    """
    table = fake.model(gpu).profiles
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        before = _mig_uuids(driver.observe(), gpu)
        for name, start in gis:
            profile = next(p for p in table.gi_profiles if str(gi_profile_name(p, table)) == name)
            gi_id = driver.create_gpu_instance(
                gpu, profile_id=profile.id, placement=Placement(start, profile.memory_slices)
            )
            if ci_slices is None:
                driver.create_compute_instance(gpu, gi_id=gi_id, profile_id=profile.default_ci.id)
                continue
            ci = next(c for c in profile.ci_profiles if c.slices == ci_slices)
            for _ in range(profile.slices // ci_slices):
                driver.create_compute_instance(gpu, gi_id=gi_id, profile_id=ci.id)
        after = _mig_uuids(driver.observe(), gpu)
    return [uuid for uuid in after if uuid not in before]


def clear(fake: FakeNvml, gpu: int) -> None:
    """Destroy every CI and GI on `gpu`."""
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        for gi in driver.observe().gpu(gpu).gpu_instances:
            for ci in gi.compute_instances:
                driver.destroy_compute_instance(gpu, gi_id=gi.id, ci_id=ci.id)
            driver.destroy_gpu_instance(gpu, gi_id=gi.id)


def processes_by_uuid(fake: FakeNvml) -> dict[str, list[int]]:
    """MIG UUID -> pids, read through NVML as the apply engine's safety gate does."""
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        observation = driver.observe()
    return {
        uuid: [p.pid for p in processes]
        for gpu in observation.gpus
        for gi in gpu.gpu_instances
        for ci in gi.compute_instances
        for uuid, processes in [(ci.uuid, ci.processes)]
    }


def _mig_uuids(observation: Any, gpu: int) -> list[str]:
    return [ci.uuid for gi in observation.gpu(gpu).gpu_instances for ci in gi.compute_instances]


def eventually(probe: Callable[[], T], *, until: Callable[[T], bool], timeout_s: float = 10.0) -> T:
    """Poll `probe` until its value satisfies `until`; fails with the last value seen (no timing asserted)."""
    deadline = Deadline(timeout_s)
    value = probe()
    while not until(value):
        if deadline.passed():
            raise AssertionError(f"condition not reached within {deadline.describe()}; last value: {value!r}")
        time.sleep(0.02)
        value = probe()
    return value


class GateClock(SystemClock):
    """A real clock whose waits last until the test calls `release()` (so a lag ends when the test says)."""

    def __init__(self) -> None:
        self._gate = threading.Event()
        self.waits: list[float] = []

    def release(self) -> None:
        self._gate.set()

    def hold(self) -> None:
        """Make later waits last until the next `release()` again."""
        self._gate.clear()

    def wait(self, event: threading.Event, timeout: float) -> bool:
        self.waits.append(timeout)
        while not (event.is_set() or self._gate.is_set()):
            event.wait(0.01)
        return event.is_set()
