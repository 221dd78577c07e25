"""Issue 14: two `migagent apply --state` at once never crash. The state lock makes the second wait
for the first (then apply on top of it), or, when it may not wait, exit 1 with one line naming the
holder's pid; never exit 70 (internal error), never a torn state file or journal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from migagent.reconcile.statelock import LOCK_FILE, StateLock, StateLockedError
from tests.integration.apply.support import LAYOUTS

MAIN = "import sys; from migagent.cli import main; sys.exit(main())"


def _apply(state: Path, layouts: Path, config: str, *extra: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", MAIN, "apply", "-f", str(layouts), "-c", config, "--state", str(state), *extra]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def _finish(run: subprocess.Popen[str]) -> tuple[int, str, str]:
    with run:
        out, err = run.communicate(timeout=180)
    return run.returncode, out, err


def _node(tmp_path: Path) -> tuple[Path, Path]:
    layouts = tmp_path / "layouts.yaml"
    layouts.write_text(LAYOUTS)
    state = tmp_path / "node.json"
    first = _apply(state, layouts, "a100-balanced", "--simulate", "2xA100-40GB")
    code, out, err = _finish(first)
    assert code == 0, out + err
    return state, layouts


def test_two_concurrent_applies_both_finish_one_after_the_other(tmp_path: Path) -> None:
    state, layouts = _node(tmp_path)
    runs = [_apply(state, layouts, config) for config in ("a100-1g", "a100-balanced")]
    results = [_finish(run) for run in runs]

    assert [code for code, _, _ in results] == [0, 0], results
    json.loads(state.read_text())  # whole, not torn
    journal = state.with_name(f"{state.name}.journal")
    assert not [p.name for p in journal.iterdir() if p.name.endswith(".tmp")]


def test_an_apply_that_may_not_wait_exits_1_with_one_line_naming_the_holders_pid(tmp_path: Path) -> None:
    state, layouts = _node(tmp_path)
    holder = StateLock(state.with_name(f"{state.name}.journal"), command="test holder")
    assert holder.try_acquire()
    try:
        code, _, err = _finish(_apply(state, layouts, "a100-1g", "--lock-timeout", "0"))
    finally:
        holder.release()

    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"pid={os.getpid()}" in lines[0]
    assert "test holder" in lines[0]
    assert LOCK_FILE in lines[0]


def test_the_state_lock_is_exclusive_between_two_opens_and_free_after_release(tmp_path: Path) -> None:
    from migagent.clock import FakeClock

    first, second = StateLock(tmp_path, command="one"), StateLock(tmp_path, command="two")
    assert first.try_acquire()
    assert not second.try_acquire()
    with pytest.raises(StateLockedError, match=r"command=one.*waited 1s"):
        second.acquire(timeout_s=1.0, clock=FakeClock(), poll_s=0.25)
    first.release()
    assert second.try_acquire()
    second.release()
