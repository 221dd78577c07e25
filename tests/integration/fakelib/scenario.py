"""One scenario of GpuDriver calls, recorded as text, for the differential test: run in-process on
FakeNvml and, in another process, on pynvml over the fake libnvidia-ml.so.1 (`python -m`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from migagent.catalog import MediaAttribute, Placement
from migagent.errors import MigAgentError
from migagent.nvml.driver import GpuDriver
from migagent.nvml.system import system_nvml
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner

SPEC = "2xA100-80GB"


def prepare(state: Path) -> None:
    """GPU 0 in MIG mode with a 2g GI, its CI and a process on it; GPU 1 without MIG, a process on it."""
    fake = FakeNvml.from_spec(SPEC)
    fake.state.gpus[0].mig_current = fake.state.gpus[0].mig_pending = 1
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        two_g = _profile(driver, 0, slices=2)
        gi = driver.create_gpu_instance(0, profile_id=two_g, placement=Placement(0, 2))
        driver.create_compute_instance(0, gi_id=gi, profile_id=_ci_profile(driver, 0, two_g))
    mig_device = fake.state.gpus[0].gpu_instances[0].compute_instances[0].uuid
    fake.sim_attach_process(mig_device, pid=777, used_memory_bytes=1 << 30)
    fake.sim_attach_process(fake.state.gpus[1].uuid, pid=888, used_memory_bytes=1 << 20)
    fake.save(state)


def _profile(driver: GpuDriver, gpu: int, *, slices: int) -> int:
    profiles = driver.profile_table(gpu).gi_profiles
    return next(p.id for p in profiles if p.slices == slices and p.media is MediaAttribute.NONE)


def _ci_profile(driver: GpuDriver, gpu: int, gi_profile: int) -> int:
    profile = driver.profile_table(gpu).gi_profile(gi_profile)
    assert profile is not None
    return max(profile.ci_profiles, key=lambda ci: ci.slices).id


def run(driver: GpuDriver) -> list[str]:
    records: list[str] = []

    def record(what: str, call: Callable[[], object]) -> None:
        try:
            records.append(f"{what}: {call()!r}")
        except MigAgentError as exc:
            records.append(f"{what}: {type(exc).__name__}: {exc}")

    three_g, one_g = _profile(driver, 0, slices=3), _profile(driver, 0, slices=1)
    record("observe", driver.observe)
    record("3g at 4", lambda: driver.create_gpu_instance(0, profile_id=three_g, placement=Placement(4, 4)))
    record("3g over the 2g", lambda: driver.create_gpu_instance(0, profile_id=three_g, placement=Placement(0, 4)))
    record("1g at 2", lambda: driver.create_gpu_instance(0, profile_id=one_g, placement=Placement(2, 1)))
    gis = {gi.placement.start: gi.id for gi in driver.observe_gpu(0).gpu_instances}
    ci_1c = _ci_profile(driver, 0, one_g)
    at_0 = Placement(0, 1)
    record("1c in 3g at 0", lambda: driver.create_compute_instance(0, gi_id=gis[4], profile_id=ci_1c, placement=at_0))
    record("1c in 3g, auto", lambda: driver.create_compute_instance(0, gi_id=gis[4], profile_id=ci_1c))
    record("CI in 1g", lambda: driver.create_compute_instance(0, gi_id=gis[2], profile_id=ci_1c))
    record("destroy the busy 2g", lambda: driver.destroy_gpu_instance(0, gi_id=gis[0]))
    record("destroy a missing GI", lambda: driver.destroy_gpu_instance(0, gi_id=99))
    record("destroy the 1g's CI", lambda: driver.destroy_compute_instance(0, gi_id=gis[2], ci_id=0))
    record("destroy the 1g", lambda: driver.destroy_gpu_instance(0, gi_id=gis[2]))
    record("enable MIG on GPU 1 (busy)", lambda: driver.set_mig_mode(1, enabled=True))
    record("observe", driver.observe)
    return records


def main() -> None:
    """Run the scenario over the production NVML (`pynvml`, here loading the fake library)."""
    with GpuDriver(system_nvml(), reset_runner=SimResetRunner(FakeNvml.from_spec(SPEC))) as driver:
        json.dump(run(driver), sys.stdout)


if __name__ == "__main__":
    main()
