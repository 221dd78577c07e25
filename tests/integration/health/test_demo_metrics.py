"""`migagent demo --metrics-port N` as a user runs it: a separate process whose /metrics, /healthz and
/readyz answer while the demo runs, with every series the agent promises."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path

import pytest

from migagent_sim.deadline import Deadline
from tests.integration.health.test_metrics_while_the_agent_reconfigures import (
    LISTED_SERIES,
    Samples,
    sample,
    scrape,
    status_of,
)

MAIN = "import sys; from migagent.cli import main; sys.exit(main())"
WAIT_S = 90.0  # a bound on waiting for the demo, never an expectation of speed


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _scrape_until_the_change_is_counted(url: str, demo: subprocess.Popen[bytes], log: Path) -> Samples:
    """Until migagent_reconciles_total{outcome=applied} is 1: the attempt's outcome is the last thing it
    records (migagent_layout_info names the new layout a moment before, and a scrape between the two
    under load saw the layout with no applied reconcile yet)."""
    deadline = Deadline(WAIT_S)
    while not deadline.passed():
        if demo.poll() is not None:
            output = log.read_text(encoding="utf-8", errors="replace")[-3000:]
            said = f"the demo exited ({demo.returncode}) before its metrics counted the change"
            raise AssertionError(f"{said}:\n{output}")
        try:
            samples = scrape(url)
        except (urllib.error.URLError, ConnectionError):
            samples = {}  # not serving yet: the simulated cluster starts first
        if sample(samples, "migagent_reconciles_total", outcome="applied") == 1:
            return samples
        time.sleep(0.1)
    raise AssertionError("gave up waiting for migagent_reconciles_total{outcome=applied} 1")


@pytest.fixture
def temporary() -> Iterator[Path]:
    """The demo's TMPDIR, to look for what it leaves: a short path, since the simulated kubelet's sockets
    live under it (a unix socket's path is at most 107 bytes, and tmp_path under xdist is long)."""
    path = Path(tempfile.mkdtemp(prefix="demo-tmp-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_demo_serves_every_listed_series_and_both_probes_while_it_runs_and_a_sigterm_cleans_up(
    tmp_path: Path, temporary: Path
) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    argv = ["demo", "--metrics-address", "127.0.0.1", "--metrics-port", str(port), "--linger", "120"]
    with open(tmp_path / "demo.log", "wb") as log:
        demo = subprocess.Popen(
            [sys.executable, "-c", MAIN, *argv], stdout=log, stderr=log, env={**os.environ, "TMPDIR": str(temporary)}
        )
        try:
            samples = _scrape_until_the_change_is_counted(url, demo, tmp_path / "demo.log")
            healthz, readyz = status_of(url + "/healthz"), status_of(url + "/readyz")
            made = sorted(p.name.split("-")[0] for p in temporary.iterdir())
        finally:
            demo.terminate()
            try:
                stopped = demo.wait(WAIT_S)
            finally:
                if demo.poll() is None:
                    demo.kill()
                    demo.wait()
    output = (tmp_path / "demo.log").read_text(encoding="utf-8")
    assert (stopped, output.splitlines()[-1]) == (128 + signal.SIGTERM, "migagent demo: terminated"), output[-2000:]
    assert "migagent" in made, f"the demo's temporary directory was not under TMPDIR: {made}"
    assert not list(temporary.iterdir()), "SIGTERM left the demo's temporary directories behind"
    names = {name for name, _ in samples}
    assert set(LISTED_SERIES) <= names, f"missing: {set(LISTED_SERIES) - names}\n{output}"
    assert (healthz, readyz) == (200, 200)
    assert sample(samples, "migagent_layout_info", layout="all-balanced") == 1
    assert (sample(samples, "migagent_pods_evicted_total") or 0) >= 1
    assert (sample(samples, "migagent_gpu_instances_total", action="destroyed") or 0) > 0
    assert sample(samples, "migagent_drain_wait_seconds_count") == 1
    assert sample(samples, "migagent_readvertise_wait_seconds_count") == 1
    for phase in ("observe", "plan", "drain", "apply", "readvertise"):
        assert (sample(samples, "migagent_phase_duration_seconds_count", phase=phase) or 0) >= 1, phase
