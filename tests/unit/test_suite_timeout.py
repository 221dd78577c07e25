"""The suite's own per-test timeout (pyproject's [tool.pytest.ini_options]): a hung test fails with the
stack of every thread printed, and the run goes on to the next test and its summary."""

from __future__ import annotations

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


def test_a_hung_test_fails_with_every_threads_stack_and_the_run_reaches_its_summary(tmp_path: Path) -> None:
    (tmp_path / "test_hung.py").write_text(HUNG, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path),
            "-o", "timeout=2", "-p", "no:cacheprovider", str(tmp_path / "test_hung.py"),
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Timeout" in output
    assert "helper_waits_forever" in output, "the other thread's stack was not printed"
    assert "stuck-helper" in output
    assert "1 failed, 1 passed" in output, "the run did not go on to its summary"
