"""What the fake libnvidia-ml.so.1 costs: one GpuDriver.observe() of a 2xA100-80GB node in MIG mode
(all-balanced applied, 8 GIs), in-process FakeNvml vs pynvml over the library (FakeNvml bound in the
same process) vs pynvml over the library with the node in a state file (lock, stat, reload).

    python -m bench.fakelib_bench [--repeats N]

Builds the library with scripts/build_fake_nvml.sh into a temporary directory and measures in a
child process started with LD_LIBRARY_PATH naming it. Prints a table; asserts nothing."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, sys, time
from migagent.catalog import Placement
from migagent.nvml.driver import GpuDriver
from migagent.nvml.system import system_nvml
from migagent.sim.fake_nvml import FakeNvml
from migagent_sim.fakelib.backend import bind
from migagent.sim.reset import SimResetRunner

repeats, state = int(sys.argv[1]), sys.argv[2]

def node():
    fake = FakeNvml.from_spec("2xA100-80GB", mig_enabled=True)
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        for gpu in (0, 1):
            table = driver.profile_table(gpu)
            for slices, start in ((3, 4), (2, 0), (1, 2), (1, 3)):
                profile = next(p for p in table.gi_profiles if p.slices == slices)
                placement = Placement(start, profile.memory_slices)
                gi = driver.create_gpu_instance(gpu, profile_id=profile.id, placement=placement)
                driver.create_compute_instance(gpu, gi_id=gi, profile_id=profile.default_ci.id)
    return fake

def timed(lib, fake):
    with GpuDriver(lib, reset_runner=SimResetRunner(fake)) as driver:
        driver.observe()  # warm-up: profile tables are cached per GPU
        start = time.perf_counter()
        for _ in range(repeats):
            driver.observe()
        return (time.perf_counter() - start) / repeats * 1000

fake = node()
rows = {"FakeNvml in-process": timed(fake, fake)}
bind(fake)
rows["pynvml + library, bound FakeNvml"] = timed(system_nvml(), fake)
bind(None)
fake.save(state)
rows["pynvml + library, state file"] = timed(system_nvml(), fake)
print(json.dumps(rows))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "lib"
        env = {**os.environ, "PYTHON": sys.executable}
        subprocess.run([str(REPO / "scripts" / "build_fake_nvml.sh"), str(directory)], check=True, env=env,
                       capture_output=True)  # fmt: skip
        state = Path(tmp) / "node.json"
        env.update(LD_LIBRARY_PATH=str(directory), MIGAGENT_FAKE_NVML_STATE=str(state))
        result = subprocess.run(
            [sys.executable, "-c", _CHILD, str(args.repeats), str(state)],
            env=env, cwd=REPO, capture_output=True, text=True, check=True,
        )  # fmt: skip
    rows: dict[str, float] = json.loads(result.stdout)
    baseline = rows["FakeNvml in-process"]
    print(f"{'NVML behind GpuDriver':36} {'observe ms':>10} {'x in-process':>12}")
    for name, ms in rows.items():
        print(f"{name:36} {ms:10.2f} {ms / baseline:12.1f}")


if __name__ == "__main__":
    main()
