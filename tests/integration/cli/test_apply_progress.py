"""Progress of `migagent apply`: in JSON logs an event as each step starts and ends, and a summary; on a
terminal one short line per step as it ends, named with profile and slot."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from migagent.cli import main

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = str(ROOT / "configs/mig-layouts/mig-layouts.yaml")


def _apply_argv(state: Path, config: str) -> list[str]:
    return ["apply", "--simulate", "2xA100-40GB", "--state", str(state), "-f", SHIPPED, "-c", config]


def test_apply_logs_each_step_start_and_end_with_gpu_step_and_seconds_then_a_summary_as_json_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_apply_argv(tmp_path / "node.json", "all-balanced")) == 0
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    started = [e for e in events if e["event"] == "step_started"]
    ended = [e for e in events if e["event"] == "step_succeeded"]
    assert started
    assert [(e["gpu"], e["step"]) for e in started] == [(e["gpu"], e["step"]) for e in ended]
    assert all(isinstance(e["seconds"], float | int) and e["seconds"] >= 0 for e in ended)
    assert all(e["step"].startswith(f"GPU {e['gpu']}:") for e in started)
    # A100s: a run that sets MIG modes (and resets), then the run that creates the instances.
    mode, config = [e for e in events if e["event"] == "apply_converged"]
    assert mode["layout_hash"].startswith("mode:")
    assert mode["steps_run"] + config["steps_run"] == len(ended)
    assert config["gpus_changed"] == [0, 1]
    assert config["config"] == "all-balanced"
    # Only progress passes at a one-shot command's WARNING level: no plan or phase chatter.
    assert {e["event"] for e in events} == {"step_started", "step_succeeded", "apply_converged"}


def test_an_apply_with_nothing_to_do_prints_no_progress_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "node.json"
    assert main(_apply_argv(state, "all-disabled")) == 0
    capsys.readouterr()
    assert main(_apply_argv(state, "all-disabled")) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "nothing to change" in out


def test_apply_on_a_terminal_prints_short_progress_lines_and_the_summary(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "migagent", *_apply_argv(tmp_path / "node.json", "all-balanced")],
        stdout=subprocess.DEVNULL, stderr=terminal, cwd=ROOT,
    )
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    assert child.wait(timeout=60) == 0
    lines = b"".join(chunks).decode().splitlines()
    # One line per step, when it ends, named with the profile and the slot, not NVML's ids.
    assert lines[0].startswith("GPU 0: set MIG on (")
    assert lines[0].endswith("s)")
    assert any(line.startswith("GPU 0: create 3g.20gb at slot 4 (") for line in lines)
    ci_line = "GPU 1: create compute instance 1g.5gb at slot 0 in 1g.5gb at slot 3 ("
    assert any(line.startswith(ci_line) for line in lines)
    steps = [line for line in lines if line.startswith("GPU ")]
    assert len(steps) == len(set(steps))  # each step once
    assert not any("GI " in line or "..." in line for line in lines)
    assert any(line.startswith("set MIG modes for config all-balanced: ") for line in lines)
    assert lines[-1].startswith("applied config all-balanced: ")
    assert " step(s) on GPU 0, 1 in " in lines[-1]
    assert not any(line.startswith("{") for line in lines)  # no JSON on a terminal


def test_apply_states_one_count_of_steps_that_agrees_with_plan_and_says_what_each_part_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "node.json"
    assert main(["plan", *_apply_argv(state, "all-balanced")[1:]]) == 0
    planned = capsys.readouterr().out.splitlines()[-1]
    assert planned == "20 step(s) in all"
    assert main(_apply_argv(state, "all-balanced")) == 0
    out, err = capsys.readouterr()
    converged = [json.loads(line) for line in err.splitlines() if '"apply_converged"' in line]
    # Set MIG on and reset each GPU (GPU 1's reset ran with GPU 0's: nvidia-smi -r -i A,B); the instances.
    assert [(e["steps_run"], e["steps_skipped"]) for e in converged] == [(3, 1), (16, 0)]
    summary = [line for line in out.splitlines() if "step(s)" in line]
    assert summary == [
        "20 step(s) in all: 4 for MIG modes, then 16 for the instances; 1 of them found already done (a GPU reset"
        " with another, or by an earlier run)"
    ]
    assert "operation" not in out
