"""The same GpuDriver scenario over FakeNvml in-process and over pynvml + the fake library in
another process gives the same observations, results and errors, and leaves the same node."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from migagent.nvml.driver import GpuDriver
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner
from tests.integration.fakelib import scenario
from tests.integration.fakelib.support import REPO, library_env


def test_a_scenario_gives_the_same_records_and_node_over_the_library_as_over_fake_nvml(
    fake_nvml_dir: Path, tmp_path: Path
) -> None:
    start = tmp_path / "start.json"
    scenario.prepare(start)
    in_process, over_library = tmp_path / "in-process.json", tmp_path / "library.json"
    shutil.copy(start, over_library)

    fake = FakeNvml.load(start)
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        expected = scenario.run(driver)
    fake.save(in_process)

    result = subprocess.run(
        [sys.executable, "-m", "tests.integration.fakelib.scenario"],
        env=library_env(fake_nvml_dir, over_library),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == expected
    assert json.loads(over_library.read_text()) == json.loads(in_process.read_text())
    # The scenario reaches what it should: successes, NVML refusals, and two observations.
    assert sum(r.startswith("observe: Observation(") for r in expected) == 2
    assert any("InUse" in r for r in expected)
    assert any(r.startswith("3g at 4: ") and r[len("3g at 4: ") :].isdigit() for r in expected)
