"""A simulated node driven through the real stack: FakeNvml -> GpuDriver -> planner -> step executor.

Every figure the bench prints about "our" side comes from these calls, so a bench run is also an
end-to-end check that a plan, executed step by step, leaves the GPUs holding what was asked.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from migagent.layout.desired import DesiredGi, DesiredNode
from migagent.layout.observed import Observation, ObservedGi
from migagent.nvml.driver import GpuDriver
from migagent.planning import Plan, plan
from migagent.reconcile.executor import execute_step
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner

# A GI as the planner compares them: its profile id and its (sorted) CI profile ids.
GiKey = tuple[int, tuple[int, ...]]
_GI_DESTROY_CALL = "nvmlGpuInstanceDestroy"


def gi_key(gi: ObservedGi | DesiredGi) -> GiKey:
    return (gi.profile_id, tuple(sorted(gi.ci_profile_ids)))


def gi_multiset(gis: Iterable[ObservedGi | DesiredGi]) -> Counter[GiKey]:
    return Counter(gi_key(gi) for gi in gis)


class CountingResetRunner:
    """Resets simulated GPUs like `nvidia-smi -r`, counting resets and the GIs they wipe out."""

    def __init__(self, fake: FakeNvml) -> None:
        self._fake = fake
        self._inner = SimResetRunner(fake)
        self.resets = 0
        self.gis_wiped = 0

    def _gi_count(self) -> int:
        return sum(len(gpu.gpu_instances) for gpu in self._fake.state.gpus)

    def reset(self, pci_bus_id: str) -> None:
        before = self._gi_count()
        self._inner.reset(pci_bus_id)
        self.resets += 1
        self.gis_wiped += before - self._gi_count()


@dataclass(frozen=True)
class ApplyReport:
    """What executing one plan did to the simulated node, counted from the simulator's side."""

    steps_run: int
    gi_destroy_calls: int
    resets: int
    gis_wiped_by_reset: int

    @property
    def gis_lost(self) -> int:
        return self.gi_destroy_calls + self.gis_wiped_by_reset


@dataclass
class SimNode:
    fake: FakeNvml
    driver: GpuDriver
    reset_runner: CountingResetRunner

    def observe(self) -> Observation:
        return self.driver.observe()

    def execute(self, the_plan: Plan) -> ApplyReport:
        """Run the steps as the apply engine does: fresh observation, skip what is done, act."""
        destroys_before = self.fake.sim_mutations.count(_GI_DESTROY_CALL)
        resets_before, wiped_before = self.reset_runner.resets, self.reset_runner.gis_wiped
        run = 0
        for step in the_plan.steps:
            observation = self.observe()
            if step.is_done(observation):
                continue
            execute_step(self.driver, step, observation)
            run += 1
        return ApplyReport(
            steps_run=run,
            gi_destroy_calls=self.fake.sim_mutations.count(_GI_DESTROY_CALL) - destroys_before,
            resets=self.reset_runner.resets - resets_before,
            gis_wiped_by_reset=self.reset_runner.gis_wiped - wiped_before,
        )

    def apply(self, desired: DesiredNode) -> tuple[Plan, ApplyReport]:
        the_plan = plan(self.observe(), desired)
        return the_plan, self.execute(the_plan)


@contextmanager
def sim_node(fake: FakeNvml) -> Iterator[SimNode]:
    runner = CountingResetRunner(fake)
    with GpuDriver(fake, reset_runner=runner) as driver:
        yield SimNode(fake=fake, driver=driver, reset_runner=runner)


def time_plan(observation: Observation, desired: DesiredNode, repeats: int) -> list[float]:
    """Seconds per `plan` call. Like timeit, the garbage collector is off while timing, so a
    collection of the simulator's objects is not billed to the planner; one untimed call warms up."""
    plan(observation, desired)
    samples: list[float] = []
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            started = time.perf_counter()
            plan(observation, desired)
            samples.append(time.perf_counter() - started)
    finally:
        if collecting:
            gc.enable()
    return samples


def holds(observation: Observation, desired: DesiredNode) -> bool:
    """Whether every GPU the layout selects is in the asked mode and holds exactly its GI multiset."""
    for want in desired.gpus:
        gpu = observation.gpu(want.index)
        if gpu.mig_current != want.mig_enabled or gpu.mode_change_pending:
            return False
        if gi_multiset(gpu.gpu_instances) != gi_multiset(want.gpu_instances):
            return False
    return True
