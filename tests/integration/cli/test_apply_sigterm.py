"""`migagent apply` and SIGTERM: the apply stops at the next safe point (between two journaled steps)
with one line and exit 143, and the same apply run again finishes from where it stopped. With the
fake NVML library (MIGAGENT_FAKE_NVML_STATE), the journal defaults to beside its state file."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from migagent.cli import main
from migagent.cli.node import journal_for
from migagent.reconcile.journal import FileJournal

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


def _apply(state: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "migagent", "apply", "--state", str(state), "-f", SHIPPED, "-c", "all-balanced"]
    return subprocess.run([*argv, *extra], capture_output=True, text=True, check=False, timeout=120, cwd=ROOT)


def test_sigterm_stops_the_apply_at_a_safe_point_with_one_line_and_143_and_a_rerun_finishes(tmp_path: Path) -> None:
    state = tmp_path / "node.json"
    hooks = tmp_path / "hooks.yaml"
    hooks.write_text(HOOKS, encoding="utf-8")
    stopped = _apply(state, "--simulate", "1xH100-80GB-SXM", "-k", str(hooks))
    assert stopped.returncode == 143
    assert stopped.stderr.splitlines()[-1] == (
        "migagent apply: stopped by SIGTERM between two steps; the GPUs and the journal agree:"
        " run the same apply again to finish"
    )
    assert [line for line in stopped.stderr.splitlines() if line.startswith("migagent apply:")] == [
        stopped.stderr.splitlines()[-1]
    ]
    assert "MIG configuration applied successfully" not in stopped.stdout
    # MIG mode was set (before the hook), no GPU instance was created: the rerun creates them all.
    assert main(["assert", "--state", str(state), "-f", SHIPPED, "-c", "all-balanced"]) == 1
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
