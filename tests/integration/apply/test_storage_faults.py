"""`migagent apply` facing storage faults, as its own process: a write past `ulimit -f`, a journal path
that is a directory, a journal that holds JSON which is not a record. Disk errors exit 1 with one line
naming the path and the errno (never 70), and no temporary file survives; a bad record is dropped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from migagent.cli import main
from migagent.sim.fake_nvml import FakeNvml
from tests.storage_faults import full_directory

REPO = Path(__file__).resolve().parents[3]
LAYOUTS = REPO / "configs" / "mig-layouts" / "mig-layouts.yaml"


# Sets the file-size limit, then becomes the apply (exec keeps the limit). Not a `preexec_fn`, which
# Python calls unsafe in a process with threads (it makes subprocess fork() rather than vfork): in one
# run after tests that ran gRPC servers in this process, two of these applies died of SIGABRT with
# gRPC's "epoll_wait error: Bad file descriptor" (not reproduced since; no apply here needs the fork).
_LIMITED = (
    "import os, resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.RLIM_INFINITY));"
    " os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
)


def _apply(tmp_path: Path, config: str, *, file_limit_bytes: int | None = None) -> subprocess.CompletedProcess[str]:
    limited = [] if file_limit_bytes is None else ["-c", _LIMITED, str(file_limit_bytes)]
    return subprocess.run(
        [sys.executable, *limited, "-m", "migagent", "apply", "--state", str(tmp_path / "node.json"),
         "-f", str(LAYOUTS), "-c", config],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not line.startswith("{")]


def _temporary_files(tmp_path: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.name.endswith(".tmp"))


def _node(tmp_path: Path) -> None:
    FakeNvml.from_spec("8xH100-80GB-SXM", mig_enabled=True).save(tmp_path / "node.json")
    assert _apply(tmp_path, "all-1g.10gb").returncode == 0


def test_a_file_size_limit_during_apply_exits_1_with_one_line_naming_path_and_errno_and_no_temp_file(
    tmp_path: Path,
) -> None:
    _node(tmp_path)
    state_size = (tmp_path / "node.json").stat().st_size
    # Too small for the simulated node's state (rewritten after each change), large enough for the journal.
    done = _apply(tmp_path, "all-balanced", file_limit_bytes=state_size - 1024)
    assert done.returncode == 1, done.stderr
    [line] = _error_lines(done.stderr)
    assert line.startswith("migagent apply: cannot write ")
    assert "node.json" in line
    assert "(EFBIG)" in line
    assert _temporary_files(tmp_path) == []


def test_a_file_size_limit_below_the_journal_fails_before_any_gpu_changes(tmp_path: Path) -> None:
    _node(tmp_path)
    before = (tmp_path / "node.json").read_bytes()
    done = _apply(tmp_path, "all-balanced", file_limit_bytes=2048)
    assert done.returncode == 1, done.stderr
    [line] = _error_lines(done.stderr)
    assert "journal" in line
    assert "(EFBIG)" in line
    assert (tmp_path / "node.json").read_bytes() == before
    assert _temporary_files(tmp_path) == []


def test_a_journal_path_that_is_a_directory_exits_1_naming_it(tmp_path: Path) -> None:
    _node(tmp_path)
    journal = tmp_path / "node.json.journal" / "journal.json"
    journal.unlink()
    journal.mkdir()
    done = _apply(tmp_path, "all-balanced")
    assert done.returncode == 1, done.stderr
    [line] = _error_lines(done.stderr)
    assert str(journal.relative_to(tmp_path)) in line
    assert "(EISDIR)" in line


def test_json_that_is_not_a_journal_record_is_dropped_and_one_apply_converges(tmp_path: Path) -> None:
    _node(tmp_path)
    for content in ("null", "[]", "5", '"text"', "{not json"):
        (tmp_path / "node.json.journal" / "journal.json").write_text(content, encoding="utf-8")
        done = _apply(tmp_path, "all-balanced")
        assert done.returncode == 0, (content, done.stderr)
        assert "journal_unreadable" in done.stderr
        assert json.loads((tmp_path / "node.json.journal" / "journal.json").read_text())["phase"] == "converged"
        _apply(tmp_path, "all-1g.10gb")


@pytest.mark.parametrize(
    ("journal_dir", "says"),
    [
        ("a-file", "cannot write the state directory {tmp}/a-file: Not a directory (ENOTDIR)"),
        ("a-file/below", "cannot write the state directory {tmp}/a-file: Not a directory (ENOTDIR)"),
        ("/proc/migagent/j", "cannot write the state directory /proc/migagent: No such file or directory (ENOENT)"),
    ],
)
def test_a_journal_dir_that_cannot_be_a_directory_is_one_line_exit_1_and_the_gpus_untouched(
    journal_dir: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("not a directory\n", encoding="utf-8")
    _node(tmp_path)
    before = (tmp_path / "node.json").read_bytes()
    given = journal_dir if journal_dir.startswith("/") else str(tmp_path / journal_dir)
    argv = ["apply", "--state", str(tmp_path / "node.json"), "-f", str(LAYOUTS), "-c", "all-balanced"]
    with capture_logs():
        assert main([*argv, "--journal-dir", given]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"migagent apply: --journal-dir {given}: {says.format(tmp=tmp_path)}"
    assert (tmp_path / "node.json").read_bytes() == before


def test_a_full_journal_disk_is_refused_before_any_gpu_changes_naming_enospc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _node(tmp_path)
    before = (tmp_path / "node.json").read_bytes()
    argv = ["apply", "--state", str(tmp_path / "node.json"), "-f", str(LAYOUTS), "-c", "all-balanced"]
    with full_directory(tmp_path / "full") as full, capture_logs():
        if not full:
            pytest.skip("mounting a tmpfs is not allowed here: tests/storage_faults.full_directory")
        assert main([*argv, "--journal-dir", str(tmp_path / "full")]) == 1
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("migagent apply:")]
    assert "(ENOSPC)" in line
    assert "no GPU was changed by this apply" in line or "journal directory" in line
    assert (tmp_path / "node.json").read_bytes() == before
