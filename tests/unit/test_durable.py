"""migagent.durable: unique temporary files that never outlive a failed write, orphans of dead writers
swept at the next load while a live writer's file is left alone, and disk errors as one line."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from migagent.durable import sweep_stale_temp_files, write_atomically
from migagent.errors import StorageError
from migagent.sim.fake_nvml import FakeNvml


def _dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    return int(child.stdout)


def test_a_temporary_file_left_by_a_killed_writer_is_swept_when_the_simulated_node_loads(tmp_path: Path) -> None:
    state = tmp_path / "node.json"
    FakeNvml.from_spec("H100-80GB-SXM").save(state)
    orphan = tmp_path / f".node.json.{_dead_pid()}.0badc0de.tmp"
    orphan.write_text("{half a node", encoding="utf-8")
    FakeNvml.load(state)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node.json"]


def test_a_temporary_file_a_live_writer_holds_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "journal.json"
    live = tmp_path / f".journal.json.{os.getpid()}.feedface.tmp"
    fd = os.open(live, os.O_WRONLY | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        os.utime(live, (0, 0))  # old, yet locked: its writer is alive
        assert sweep_stale_temp_files(path) == []
        assert live.exists()
    finally:
        os.close(fd)
    assert sweep_stale_temp_files(path) == [live]  # unlocked and old: an orphan of a reused pid


def test_two_writers_never_share_a_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    for i in range(20):
        write_atomically(path, f"{i}".encode(), what="test")
    assert path.read_text() == "19"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_write_past_the_file_size_limit_is_efbig_in_one_line_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    code = (
        "import resource, sys; from pathlib import Path\n"
        "from migagent.durable import ignore_file_size_signal, write_atomically\n"
        "from migagent.errors import StorageError\n"
        "ignore_file_size_signal()\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))\n"
        "try:\n"
        f"    write_atomically(Path({str(tmp_path / 'big.json')!r}), b'x' * 100000, what='the test file')\n"
        "except StorageError as exc:\n"
        "    print(exc); sys.exit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == f"cannot write the test file {tmp_path / 'big.json'}: File too large (EFBIG)"
    assert list(tmp_path.iterdir()) == []


def test_a_target_that_is_a_directory_is_eisdir(tmp_path: Path) -> None:
    (tmp_path / "state.json").mkdir()
    with pytest.raises(StorageError, match=r"state\.json: Is a directory \(EISDIR\)"):
        write_atomically(tmp_path / "state.json", b"{}", what="the state")
