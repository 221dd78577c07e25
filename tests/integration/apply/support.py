"""A simulated node wired to the real driver, planner and engine, plus a crash seam.

`SimNode` owns one FakeNvml (the "hardware"), a boot id that tests can change, and a journal
directory; every `engine()` call builds a fresh ApplyEngine on them, as a restarted agent would.
`crashing_driver` wraps the driver and raises `SimulatedCrash` (a BaseException, so nothing in the
engine can catch it) at the k-th mutation, either before it reaches NVML or right after NVML did it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from migagent.clock import FakeClock
from migagent.layout.desired import DesiredNode
from migagent.layout.observed import Observation
from migagent.layout.parse import parse_layout
from migagent.layout.resolve import identity_of, resolve_config
from migagent.nvml.driver import GpuDriver
from migagent.planning import Plan, StepKind, plan
from migagent.reconcile.bootid import FixedBootId
from migagent.reconcile.journal import FileJournal, desired_node_hash
from migagent.reconcile.machine import ApplyEngine, ApplyResult
from migagent.reconcile.ports import NodeDriver
from migagent.reconcile.reboot import RecordingRebootRequester
from migagent.reconcile.retry import RetryPolicy
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner
from migagent_sim.fakelib.backend import nvml_for

LAYOUTS = """
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {}
  a100-balanced:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
  a100-1g:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.5gb": 7}
  a100-gpu0-1g:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"1g.5gb": 7}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
  a100-too-big:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.20gb": 2, "1g.5gb": 1}
  a100-gpu1-balanced:
    - devices: [1]
      mig-enabled: true
      mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
  a100-gpu0-on-gpu1-1g:
    - devices: [0]
      mig-enabled: true
      mig-devices: {}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"1g.5gb": 7}
  h100-2x3g:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
  h100-3g-split:
    - devices: all
      mig-enabled: true
      mig-devices: {"1c.3g.40gb": 3, "3g.40gb": 1}
  h100-3g-2g-1g:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}
  h100-gpu5-on:
    - devices: [5]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  h100-gpu2-on-gpu5-off:
    - devices: [2]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
    - devices: [5]
      mig-enabled: false
"""

NVML_MUTATIONS = (
    "nvmlDeviceSetMigMode",
    "nvmlDeviceCreateGpuInstanceWithPlacement",
    "nvmlGpuInstanceCreateComputeInstanceWithPlacement",
    "nvmlComputeInstanceDestroy",
    "nvmlGpuInstanceDestroy",
)


class SimNode:
    def __init__(self, spec: str, journal_dir: Path) -> None:
        self.fake = FakeNvml.from_spec(spec)
        self.boot = FixedBootId()
        self.clock = FakeClock()
        self.journal_dir = journal_dir
        self.reboots = RecordingRebootRequester()
        self.layout = parse_layout(LAYOUTS, source="layouts.yaml")
        self.driver = self.new_driver()

    def new_driver(self) -> GpuDriver:
        """A freshly initialised driver on the same simulated hardware, as a restarted agent has.

        The previous driver is not shut down here (a crashed process does not call nvmlShutdown);
        `restart_process` releases its NVML client as the kernel would."""
        return GpuDriver(nvml_for(self.fake), reset_runner=SimResetRunner(self.fake)).__enter__()

    def restart_process(self) -> None:
        """The crashed process is gone and a new one starts. The dead one never called nvmlShutdown,
        but the kernel closed its handles, so its NVML client no longer holds the GPUs."""
        self.fake.nvmlShutdown()
        self.driver = self.new_driver()

    def reboot(self) -> None:
        self.fake.sim_reboot()
        self.boot.reboot()
        self.driver = self.new_driver()

    def journal(self) -> FileJournal:
        return FileJournal(self.journal_dir)

    def observe(self) -> Observation:
        return self.driver.observe()

    def desired(self, config: str) -> DesiredNode:
        return resolve_config(self.layout, config, [identity_of(g) for g in self.observe().gpus])

    def plan(self, config: str) -> Plan:
        return plan(self.observe(), self.desired(config))

    def engine(self, driver: NodeDriver | None = None, **options: Any) -> ApplyEngine:
        options.setdefault("retry", RetryPolicy(step_attempts=4))
        return ApplyEngine(
            driver or self.driver,
            self.journal(),
            clock=self.clock,
            boot_id_provider=self.boot,
            reboot_requester=self.reboots,
            **options,
        )

    def apply(self, config: str, *, driver: NodeDriver | None = None, **options: Any) -> ApplyResult:
        desired = self.desired(config)
        engine = self.engine(driver, **options)
        return engine.apply(desired, layout_hash=desired_node_hash(desired), config_name=config)

    def mig_uuids(self, gpu: int) -> set[str]:
        return {ci.uuid for gi in self.observe().gpu(gpu).gpu_instances for ci in gi.compute_instances}


def step_counts(p: Plan) -> Counter[StepKind]:
    return Counter(step.kind for step in p.steps)
