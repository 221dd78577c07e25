"""The fake libnvidia-ml.so.1 serves any NVML client with only MIGAGENT_FAKE_NVML_STATE/SPEC and
LD_LIBRARY_PATH set: a process without Python (tests/integration/fakelib/clients/nvml_client.c,
loading the library as go-nvml does) gets an interpreter the library starts itself, calls from many
threads at once are answered, and processes running at the same time share one node without losing
each other's changes. (NVIDIA's own Go tools over the library: tests/judge.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import SimNodeState
from migagent_sim.fakelib.node import NvmlClients
from tests.integration.fakelib.support import library_env

PYNVML_CREATE = """\
import sys, pynvml
pynvml.nvmlInit()
device = pynvml.nvmlDeviceGetHandleByIndex(int(sys.argv[1]))
profile = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(device, 0)
for _ in range(int(sys.argv[2])):
    gi = pynvml.nvmlDeviceCreateGpuInstance(device, profile.id)
    ci = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 0, 0)
    pynvml.nvmlGpuInstanceCreateComputeInstance(gi, ci.id)
pynvml.nvmlShutdown()
print(sys.argv[2])
"""


def test_a_program_without_python_gets_the_simulated_node(
    nvml_client: Path, fake_nvml_dir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "node.json"
    result = subprocess.run(
        [str(nvml_client), "info"], env=library_env(fake_nvml_dir, state, spec="2xH100-80GB-SXM"),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    gpus = SimNodeState.load(state).gpus  # created from the spec by the interpreter the library started
    assert result.stdout.splitlines() == [f"{i} NVIDIA H100 80GB HBM3 {gpu.uuid} 0 0" for i, gpu in enumerate(gpus)]


def test_calls_from_many_threads_of_one_process_all_succeed(
    nvml_client: Path, fake_nvml_dir: Path, tmp_path: Path
) -> None:
    env = library_env(fake_nvml_dir, tmp_path / "node.json", spec="4xA100-80GB")
    result = subprocess.run(
        [str(nvml_client), "threads", "8", "25"], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0", "calls that did not succeed"


def test_processes_running_at_once_change_one_node_and_lose_no_change(
    nvml_client: Path, fake_nvml_dir: Path, tmp_path: Path
) -> None:
    """Three C processes and a pynvml one each fill a GPU of the same node with 1g GPU instances, at once."""
    state = tmp_path / "node.json"
    FakeNvml.from_spec("4xA100-80GB", mig_enabled=True).save(state)
    env = library_env(fake_nvml_dir, state)
    commands = [[str(nvml_client), "create", str(gpu), "0", "7"] for gpu in range(3)]
    commands.append([sys.executable, "-c", PYNVML_CREATE, "3", "7"])
    running = [
        subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands
    ]
    outputs = [process.communicate(timeout=300) for process in running]
    assert [(p.returncode, out.strip()) for p, (out, _err) in zip(running, outputs, strict=True)] == [(0, "7")] * 4, (
        outputs
    )
    gpus = json.loads(state.read_text())["gpus"]
    assert [len(gpu["gpu_instances"]) for gpu in gpus] == [7, 7, 7, 7]
    uuids = [ci["uuid"] for gpu in gpus for gi in gpu["gpu_instances"] for ci in gi["compute_instances"]]
    assert len(set(uuids)) == 28, "every compute instance is a MIG device of its own"
    assert NvmlClients(state.with_name("node.json.clients")).read() == {}, "every client shut NVML down"
