"""`migagent apply` and SIGTERM or SIGINT (Ctrl-C): the apply stops at the next safe point (between two
journaled steps, no GPU instance left without compute instances) with one line and exit 143 or 130,
and the same apply run again finishes from where it stopped. With the fake NVML library
(MIGAGENT_FAKE_NVML_STATE), the journal defaults to beside its state file."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from migagent.cli import main
from migagent.cli.node import SIGINT_AFTER_MUTATIONS_ENV, journal_for
from migagent.nvml.driver import GpuDriver
from migagent.reconcile.journal import FileJournal
from migagent.reconcile.states import Phase
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = str(ROOT / "configs/mig-layouts/mig-layouts.yaml")
# mig-parted's hooks format; the hook signals the apply that runs it ($PPID), as systemd or the kubelet would.
HOOKS = """version: v1
hooks:
  pre-apply-config:
    - workdir: /
      command: /bin/sh
      args: ["-c", "kill -TERM $PPID"]
"""


def _apply(state: Path, *extra: str, config: str = "all-balanced", env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "migagent", "apply", "--state", str(state), "-f", SHIPPED, "-c", config]
    return subprocess.run(
        [*argv, *extra], capture_output=True, text=True, check=False, timeout=120, cwd=ROOT,
        env=None if env is None else {**os.environ, **env},
    )


def test_sigterm_stops_the_apply_at_a_safe_point_with_one_line_and_143_and_a_rerun_finishes(tmp_path: Path) -> None:
    state = tmp_path / "node.json"
    hooks = tmp_path / "hooks.yaml"
    hooks.write_text(HOOKS, encoding="utf-8")
    stopped = _apply(state, "--simulate", "1xH100-80GB-SXM", "-k", str(hooks))
    assert stopped.returncode == 143
    last = stopped.stderr.splitlines()[-1]
    # The stop lands at the first step of the device part, or (the signal's thread being late) the next.
    assert last.startswith("migagent apply: stopped by SIGTERM between two steps")
    assert last.endswith(": run the same apply again to finish")
    assert [line for line in stopped.stderr.splitlines() if line.startswith("migagent apply:")] == [
        "migagent apply: SIGTERM: stopping after the step in progress", last
    ]
    assert "MIG configuration applied successfully" not in stopped.stdout
    assert _bare_instances(state) == []
    # MIG mode was set (before the hook), no GPU instance is left half made: the rerun creates them all.
    assert main(["assert", "--state", str(state), "-f", SHIPPED, "-c", "all-balanced"]) == 1
    finished = _apply(state)
    assert finished.returncode == 0, finished.stderr
    assert main(["assert", "--state", str(state), "-f", SHIPPED, "-c", "all-balanced"]) == 0


def _bare_instances(state: Path) -> list[tuple[int, int]]:
    """(GPU, GI id) of every GPU instance on the saved node that has no compute instance."""
    fake = FakeNvml.load(state)
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        observation = driver.observe()
    return [(gpu.index, gi.id) for gpu in observation.gpus for gi in gpu.gpu_instances if not gi.compute_instances]


def test_ctrl_c_mid_change_stops_at_a_safe_point_leaving_no_gpu_instance_without_compute_instances(
    tmp_path: Path,
) -> None:
    state = tmp_path / "node.json"
    assert _apply(state, "--simulate", "2xH100-80GB-SXM", config="all-1g.10gb").returncode == 0
    # all-1g.10gb -> all-balanced destroys 6 CIs, then their GIs, then creates: Ctrl-C after the 3rd CI destroy.
    stopped = _apply(state, env={SIGINT_AFTER_MUTATIONS_ENV: "3"})
    assert stopped.returncode == 130, stopped.stderr
    said = [line for line in stopped.stderr.splitlines() if line.startswith("migagent apply:")]
    assert said[0] == "migagent apply: SIGINT (Ctrl-C): stopping after the step in progress"
    assert said[-1].startswith("migagent apply: stopped by SIGINT (Ctrl-C) between two steps; destroyed ")
    assert said[-1].endswith(
        " GPU instance(s) the stop left without compute instances: run the same apply again to finish"
    )
    assert _bare_instances(state) == []
    exported = subprocess.run([sys.executable, "-m", "migagent", "export", "--state", str(state)],
                              capture_output=True, text=True, check=False, timeout=120, cwd=ROOT)
    assert exported.returncode == 0
    assert "warning" not in exported.stderr
    finished = _apply(state)
    assert finished.returncode == 0, finished.stderr
    assert main(["assert", "--state", str(state), "-f", SHIPPED, "-c", "all-balanced"]) == 0


def test_the_fake_librarys_apply_keeps_its_journal_beside_its_state_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MIGAGENT_JOURNAL_DIR", raising=False)
    monkeypatch.setenv("MIGAGENT_FAKE_NVML_STATE", str(tmp_path / "fake-node.json"))
    args = argparse.Namespace(journal_dir=None, state=None, simulate=None)
    journal = journal_for(args)
    assert isinstance(journal, FileJournal)
    assert journal.directory == tmp_path / "fake-node.json.journal"
    monkeypatch.delenv("MIGAGENT_FAKE_NVML_STATE")
    assert journal_for(args).directory == Path("/var/lib/migagent")  # type: ignore[attr-defined]


GPU0_ONLY = """version: v1
mig-configs:
  gpu0-all-1g:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
"""


def test_ctrl_c_cleans_up_only_what_the_apply_made_and_names_the_bare_instance_it_left(tmp_path: Path) -> None:
    """Issue 37 item 11: another tool's GPU instance without compute instances, on a GPU the config does
    not select, was destroyed by the stop's clean-up (an apply that runs to the end leaves it)."""
    state = tmp_path / "node.json"
    assert _apply(state, "--simulate", "2xH100-80GB-SXM").returncode == 0  # all-balanced
    fake = FakeNvml.load(state)
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        gi = next(gi for gi in driver.observe().gpu(1).gpu_instances if gi.profile_id == 9)  # the 3g GI
        driver.destroy_compute_instance(1, gi_id=gi.id, ci_id=gi.compute_instances[0].id)
    fake.save(state)
    layouts = tmp_path / "gpu0.yaml"
    layouts.write_text(GPU0_ONLY, encoding="utf-8")
    argv = [sys.executable, "-m", "migagent", "apply", "--state", str(state), "-f", str(layouts), "-c", "gpu0-all-1g"]

    stopped = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120, cwd=ROOT,
                             env={**os.environ, SIGINT_AFTER_MUTATIONS_ENV: "6"})

    assert stopped.returncode == 130, stopped.stderr
    assert _bare_instances(state) == [(1, gi.id)]
    said = [line for line in stopped.stderr.splitlines() if line.startswith("migagent apply:")]
    left = f"; left GPU 1: GPU instance {gi.id} at slot 4 without compute instances: this apply did not make them"
    assert left in said[-1]
    finished = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120, cwd=ROOT)
    assert finished.returncode == 0, finished.stderr
    assert _bare_instances(state) == [(1, gi.id)]


def test_ctrl_c_after_the_last_mutation_lets_the_apply_finish_and_says_so_in_one_line(tmp_path: Path) -> None:
    """Issue 37 item 15: all-balanced -> all-disabled on 2x A100 ends with one reset of both GPUs (the
    20th mutation) and GPU 1's reset step, then already done; Ctrl-C there exited 130 with "run the same
    apply again" although nothing was left, and the journal stayed `applying`."""
    state = tmp_path / "node.json"
    assert _apply(state, "--simulate", "2xA100-40GB").returncode == 0
    stopped = _apply(state, config="all-disabled", env={SIGINT_AFTER_MUTATIONS_ENV: "20"})
    said = [line for line in stopped.stderr.splitlines() if line.startswith("migagent apply:")]
    # The signal is noted on a thread of its own: it may land only once the apply has finished.
    assert (stopped.returncode, said[-1]) in {
        (130, "migagent apply: SIGINT (Ctrl-C) came after the last change: the apply finished"),
        (0, "migagent apply: SIGINT (Ctrl-C): stopping after the step in progress"),
    }, stopped.stderr
    assert "MIG configuration applied successfully" in stopped.stdout
    record = FileJournal(tmp_path / "node.json.journal").load()
    assert record is not None
    assert record.phase is Phase.CONVERGED
    assert main(["assert", "--state", str(state), "-f", SHIPPED, "-c", "all-disabled"]) == 0


def test_a_second_ctrl_c_after_a_stop_has_said_its_line_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37 item 15: once the stop's line is out, the handlers were put back, and a second Ctrl-C
    before the process exited added an "interrupted" line or ended it by the signal. In this process
    (its main thread, where signal handlers live), the second Ctrl-C comes once `main` has returned."""
    state = tmp_path / "node.json"
    assert _apply(state, "--simulate", "2xH100-80GB-SXM", config="all-1g.10gb").returncode == 0
    monkeypatch.setenv(SIGINT_AFTER_MUTATIONS_ENV, "3")
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert main(["apply", "--state", str(state), "-f", SHIPPED, "-c", "all-balanced"]) == 130
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:  # what the CLI's exit path met: an "interrupted" line, or death by the signal
        pytest.fail("the second Ctrl-C interrupted the process")
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("migagent apply:")]
    assert said[-1].startswith("migagent apply: stopped by SIGINT (Ctrl-C) between two steps")
    assert len(said) == 2
