"""`migagent apply`, `export` and `assert` without --simulate, in their own processes: pynvml loads
the fake libnvidia-ml.so.1 from LD_LIBRARY_PATH and resets go through the fake nvidia-smi on PATH."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from migagent.sim.fake_nvml import FakeNvml
from migagent_sim.fakelib.node import NvmlClients
from tests.integration.fakelib.support import LAYOUTS, library_env, migagent

BALANCED_A100_80GB = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}


def _exported_devices(output: str) -> list[dict[str, object]]:
    exported = yaml.safe_load(output)
    devices: list[dict[str, object]] = exported["mig-configs"]["current"]
    return devices


def test_apply_export_and_assert_run_the_real_gpu_path_over_the_library(fake_nvml_dir: Path, tmp_path: Path) -> None:
    state = tmp_path / "node.json"
    FakeNvml.from_spec("2xA100-80GB", mig_enabled=True).save(state)
    env = library_env(fake_nvml_dir, state)
    journal = ["--journal-dir", str(tmp_path / "journal")]

    applied = migagent(env, "apply", "-f", str(LAYOUTS), "-c", "all-balanced", *journal, cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    exported = migagent(env, "export", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert _exported_devices(exported.stdout) == [
        {"devices": "all", "mig-enabled": True, "mig-devices": BALANCED_A100_80GB}
    ]
    asserted = migagent(env, "assert", "-f", str(LAYOUTS), "-c", "all-balanced", cwd=tmp_path)
    assert asserted.returncode == 0, asserted.stderr
    # The library saved every change to the state file; the CLI never saw a --state flag.
    gpus = json.loads(state.read_text())["gpus"]
    assert [len(gpu["gpu_instances"]) for gpu in gpus] == [4, 4]
    assert NvmlClients(state.with_name("node.json.clients")).read() == {}, "every client shut NVML down"


def test_apply_that_enables_mig_on_ampere_resets_through_nvidia_smi_after_releasing_nvml(
    fake_nvml_dir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "node.json"
    env = library_env(fake_nvml_dir, state, spec="2xA100-80GB")
    journal = ["--journal-dir", str(tmp_path / "journal")]

    applied = migagent(env, "apply", "-f", str(LAYOUTS), "-c", "all-balanced", *journal, cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    assert migagent(env, "assert", "-f", str(LAYOUTS), "-c", "all-balanced", cwd=tmp_path).returncode == 0


def test_a_missing_state_variable_is_an_error_naming_it(fake_nvml_dir: Path, tmp_path: Path) -> None:
    env = library_env(fake_nvml_dir, tmp_path / "node.json")
    del env["MIGAGENT_FAKE_NVML_STATE"]
    exported = migagent(env, "export", cwd=tmp_path)
    assert exported.returncode != 0
    assert "MIGAGENT_FAKE_NVML_STATE is not set" in exported.stderr


def test_a_state_file_that_does_not_exist_yet_needs_a_spec(fake_nvml_dir: Path, tmp_path: Path) -> None:
    env = library_env(fake_nvml_dir, tmp_path / "node.json")
    exported = migagent(env, "export", cwd=tmp_path)
    assert exported.returncode != 0
    assert "set MIGAGENT_FAKE_NVML_SPEC" in exported.stderr
    assert not (tmp_path / "node.json").exists()
