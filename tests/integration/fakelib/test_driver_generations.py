"""`scripts/build_fake_nvml.sh DIR --old-driver` models an R470-era driver: no
nvmlDeviceGetComputeRunningProcesses_v3, which pynvml's unversioned call needs, while _v2 answers.

Over such a driver pynvml's unversioned call raises NVMLLibraryMismatchError, which is *not* an
NVMLError: a caller falling back to _v2 must catch it (or call _v3 and catch FUNCTION_NOT_FOUND)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from migagent.sim.fake_nvml import FakeNvml
from tests.integration.fakelib.support import LAYOUTS, build, library_env, migagent, python

PROCESS_CALLS = (
    "import json, pynvml\n"
    "pynvml.nvmlInit()\n"
    "device = pynvml.nvmlDeviceGetHandleByIndex(0)\n"
    "answers = {}\n"
    "for name in ('nvmlDeviceGetComputeRunningProcesses', 'nvmlDeviceGetComputeRunningProcesses_v2'):\n"
    "    try:\n"
    "        answers[name] = [p.pid for p in getattr(pynvml, name)(device)]\n"
    "    except Exception as exc:\n"
    "        answers[name] = type(exc).__name__\n"
    "print(json.dumps(answers))\n"
)


@pytest.mark.parametrize(
    ("options", "unversioned"),
    [((), [4242]), (("--old-driver",), "NVMLLibraryMismatchError")],
    ids=["current-driver", "old-driver-without-v3"],
)
def test_process_calls_by_driver_generation(
    tmp_path: Path, options: tuple[str, ...], unversioned: object
) -> None:
    directory = build(tmp_path / "lib", *options)
    state = tmp_path / "node.json"
    fake = FakeNvml.from_spec("A100-80GB")
    fake.sim_attach_process(fake.state.gpus[0].uuid, pid=4242)
    fake.save(state)
    result = python(library_env(directory, state), PROCESS_CALLS)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "nvmlDeviceGetComputeRunningProcesses": unversioned,
        "nvmlDeviceGetComputeRunningProcesses_v2": [4242],
    }

OBSERVE_PROCESSES = (
    "import json, pynvml\n"
    "from migagent.nvml import GpuDriver, NvidiaSmiResetRunner\n"
    "driver = GpuDriver(pynvml, reset_runner=NvidiaSmiResetRunner())\n"
    "print(json.dumps([[p.pid for p in gpu.processes] for gpu in driver.observe().gpus]))\n"
)


def _node(state: Path, *, process: bool) -> None:
    """2xA100-80GB with MIG off; with `process`, one runs on GPU 1 (read through the process call)."""
    fake = FakeNvml.from_spec("2xA100-80GB")
    if process:
        fake.sim_attach_process(fake.state.gpus[1].uuid, pid=4242)
    fake.save(state)


def test_an_r470_driver_is_observed_with_the_real_pynvml_through_the_v2_process_call(tmp_path: Path) -> None:
    directory = build(tmp_path / "lib", "--old-driver")
    state = tmp_path / "node.json"
    _node(state, process=True)
    env = library_env(directory, state)
    exported = migagent(env, "export", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    doctor = migagent(env, "doctor", "-o", "json", cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stderr
    assert json.loads(doctor.stdout)["driver_version"] == "470.256.02"
    observed = python(env, OBSERVE_PROCESSES)
    assert observed.returncode == 0, observed.stderr
    assert json.loads(observed.stdout) == [[], [4242]]


def test_an_r470_driver_is_refused_a_change_with_one_line_naming_the_floor(tmp_path: Path) -> None:
    directory = build(tmp_path / "lib", "--old-driver")
    state = tmp_path / "node.json"
    _node(state, process=False)
    before = state.read_text()
    env = library_env(directory, state)
    applied = migagent(
        env, "apply", "-f", str(LAYOUTS), "-c", "all-1g.10gb", "--journal-dir", str(tmp_path / "j"), cwd=tmp_path
    )
    assert applied.returncode != 0
    said = [line for line in applied.stderr.splitlines() if line.strip() and not line.startswith("{")]  # not logs
    assert len(said) == 1, applied.stderr
    floor = said
    assert "470.256.02" in floor[0]
    assert "nvmlGpuInstanceCreateComputeInstanceWithPlacement" in floor[0]
    assert json.loads(state.read_text())["gpus"] == json.loads(before)["gpus"], "nothing changed"
