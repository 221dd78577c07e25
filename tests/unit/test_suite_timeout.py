"""The suite's own per-test timeout (pyproject's [tool.pytest.ini_options]): a hung test fails with the
stack of every thread printed, and the run goes on to the next test and its summary."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

HUNG = textwrap.dedent(
    """
    import threading

    def helper_waits_forever(never: threading.Event) -> None:
        never.wait()

    def test_hangs() -> None:
        never = threading.Event()
        threading.Thread(target=helper_waits_forever, args=(never,), name="stuck-helper", daemon=True).start()
        never.wait()

    def test_after_the_hang() -> None:
        assert True
    """
)


HUNG_TEARDOWN = textwrap.dedent(
    """
    import threading
    from collections.abc import Iterator

    import pytest

    @pytest.fixture
    def stops_what_never_stops() -> Iterator[threading.Event]:
        never = threading.Event()
        threading.Thread(target=never.wait, name="left-behind").start()  # not a daemon: exit would wait on it
        yield never
        never.wait()  # a teardown waiting on what the hung call was to finish

    def test_hangs_and_so_does_its_teardown(stops_what_never_stops: threading.Event) -> None:
        stops_what_never_stops.wait()

    def test_after_the_hang() -> None:
        assert True
    """
)


def _pytest(tmp_path: Path, source: str) -> str:
    """The output of a child pytest run of `source` under this suite's configuration (pyproject and
    tests/conftest.py), with a 2 s timeout for each test and for a teardown after a timeout."""
    (tmp_path / "test_hung.py").write_text(source, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path),
            "-p", "tests.conftest", "-o", "timeout=2", "-o", "teardown_timeout=2", "-p", "no:cacheprovider",
            "-n", "0", str(tmp_path / "test_hung.py"),
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    return output


def test_a_hung_test_fails_with_every_threads_stack_and_the_run_reaches_its_summary(tmp_path: Path) -> None:
    output = _pytest(tmp_path, HUNG)
    assert "Timeout" in output
    assert "helper_waits_forever" in output, "the other thread's stack was not printed"
    assert "stuck-helper" in output
    assert "1 failed, 1 passed" in output, "the run did not go on to its summary"


def test_a_teardown_hung_after_the_timeout_fails_too_and_the_run_ends(tmp_path: Path) -> None:
    output = _pytest(tmp_path, HUNG_TEARDOWN)
    # 2 s, stretched by the load factor on a loaded machine (tests/conftest.py)
    assert re.search(r"Teardown still running after [0-9.]+ s", output), output[-3000:]
    assert "stops_what_never_stops" in output, "the stack of the hung teardown was not printed"
    assert "1 failed, 1 passed, 1 error" in output, "the run did not go on to its summary"
    assert "non-daemon thread(s) still running after the run (left-behind)" in output, "the process did not exit"
