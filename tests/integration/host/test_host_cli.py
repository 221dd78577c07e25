"""`migagent host` as systemd runs it: a separate process on a simulated node, speaking sd_notify,
re-applying on a file change and on SIGHUP, and stopping cleanly on SIGTERM."""

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from migagent.cli import main
from tests.integration.host.support import LAYOUTS, WAIT_S, write_atomically
from tests.integration.host.test_sdnotify import NotifySocket

MAIN = "import sys; from migagent.cli import main; sys.exit(main())"


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[NotifySocket]:
    listener = NotifySocket(str(tmp_path / "notify.sock"))
    yield listener
    listener.close()


def _files(tmp_path: Path) -> tuple[Path, Path]:
    etc = tmp_path / "etc"
    etc.mkdir()
    layouts, selected = etc / "layouts.yaml", etc / "migagent.env"
    layouts.write_text(LAYOUTS, encoding="utf-8")
    selected.write_text("MIGAGENT_LAYOUT=a100-balanced\n", encoding="utf-8")
    return layouts, selected


def test_migagent_host_is_ready_after_applying_reapplies_on_change_and_sighup_and_stops_on_sigterm(
    tmp_path: Path, notify_socket: NotifySocket
) -> None:
    layouts, selected = _files(tmp_path)
    state = tmp_path / "node.json"
    argv = [
        "host", "-f", str(layouts), "--selected-layout-file", str(selected),
        "--simulate", "A100-40GB", "--state", str(state), "--journal-dir", str(tmp_path / "journal"),
        "--host-gpu-clients", "nvidia-dcgm.service", "--debounce", "0.05",
    ]  # fmt: skip
    env = {**os.environ, "NOTIFY_SOCKET": notify_socket.name, "WATCHDOG_USEC": "2000000"}
    with open(tmp_path / "host.log", "wb") as log:
        process = subprocess.Popen([sys.executable, "-c", MAIN, *argv], env=env, stdout=log, stderr=log)
        try:
            ready = notify_socket.receive_until("READY=1")
            write_atomically(selected, "MIGAGENT_LAYOUT=a100-1g\n")
            changed = notify_socket.receive_until("STATUS=config a100-1g applied")
            process.send_signal(signal.SIGHUP)
            reloaded = notify_socket.receive_until("STATUS=config a100-1g applied; nothing to change")
            process.send_signal(signal.SIGTERM)
            stopped = notify_socket.receive_until("STOPPING=1")
            code = process.wait(WAIT_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    logs = (tmp_path / "host.log").read_text(encoding="utf-8")
    assert code == 0, logs
    assert ready[-1] == "READY=1\nSTATUS=config a100-balanced applied"
    assert "STATUS=applying config a100-1g" in changed
    assert reloaded[-1] == "STATUS=config a100-1g applied; nothing to change"
    assert stopped[-1].startswith("STOPPING=1")
    # Around the change the file selected, the configured client was stopped before the first step on
    # the GPUs and started again after the last one.
    events = [json.loads(line)["event"] for line in logs.splitlines() if line.startswith("{")]
    change = events[events.index("host_layout_applied") + 1 :]  # after the first apply (a100-balanced)
    change = change[: change.index("host_layout_applied") + 1]
    around = [e for e in change if e in ("host_client_stopped", "step_started", "host_client_started")]
    assert around[0] == "host_client_stopped"
    assert around[-1] == "host_client_started"
    assert "step_started" in around[1:-1]
    assert '"config": "a100-1g", "clients_restarted": ["nvidia-dcgm.service"]' in logs
    with capture_logs():
        assert main(["assert", "-f", str(layouts), "-c", "a100-1g", "--state", str(state)]) == 0


def test_migagent_host_refuses_a_layout_file_in_a_missing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, selected = _files(tmp_path)
    argv = ["host", "-f", str(tmp_path / "nowhere" / "layouts.yaml"), "--selected-layout-file", str(selected)]
    with capture_logs():
        code = main([*argv, "--simulate", "A100-40GB"])
    assert code == 1
    assert "nowhere: it is not an existing directory" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--debounce", "--retry-interval", "--max-apply-seconds"])
def test_migagent_host_rejects_non_positive_durations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    layouts, selected = _files(tmp_path)
    argv = ["host", "-f", str(layouts), "--selected-layout-file", str(selected), "--simulate", "A100-40GB"]
    with capture_logs(), pytest.raises(SystemExit) as exited:  # refused as the flag is parsed (cli/values.py)
        main([*argv, flag, "0"])
    assert exited.value.code == 2
    assert f"argument {flag}: must be more than 0 seconds, got 0" in capsys.readouterr().err
