"""`scripts/build_fake_nvml.sh DIR --old-driver` models an R470-era driver: no
nvmlDeviceGetComputeRunningProcesses_v3, which pynvml's unversioned call needs, while _v2 answers.

Over such a driver pynvml's unversioned call raises NVMLLibraryMismatchError, which is *not* an
NVMLError: a caller falling back to _v2 must catch it (or call _v3 and catch FUNCTION_NOT_FOUND)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from migagent.sim.fake_nvml import FakeNvml
from tests.integration.fakelib.support import build, library_env, python

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
