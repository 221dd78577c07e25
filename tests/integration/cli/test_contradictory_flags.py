"""Flags that contradict each other are refused in one line, exit 2, before anything is read or written.

Only flags given on the command line count: a default from the environment (MIGAGENT_SIMULATE,
NVIDIA_DRIVER_ROOT) is the place the command runs in, not a choice that can contradict another.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from migagent.cli import main

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = str(ROOT / "configs/mig-layouts/mig-layouts.yaml")
LAYOUT = ["-f", SHIPPED, "-c", "all-balanced"]

REFUSED = [
    (["plan", *LAYOUT, "--gpu-model", "H100-80GB-SXM", "--state", "STATE"], "--gpu-model and --state contradict"),
    (["plan", *LAYOUT, "--gpu-model", "H100-80GB-SXM", "--simulate", "1xA30-24GB"], "--gpu-model and --simulate"),
    (["plan", *LAYOUT, "--gpu-model", "H100-80GB-SXM", "--driver-root", "/x"], "--gpu-model and --driver-root"),
    (["export", "--simulate", "1xA30-24GB", "--driver-root", "/x"], "--driver-root and --simulate contradict"),
    (["doctor", "--state", "STATE", "--driver-root", "/x"], "--driver-root and --state contradict"),
    (["assert", *LAYOUT, "-a", "--state", "STATE"], "--valid-config and --state contradict"),
    (["apply", *LAYOUT, "--state", "STATE", "--skip-reset", "--allow-reboot"], "--skip-reset and --allow-reboot"),
    (["apply", *LAYOUT, "--state", "STATE", "--reboot-command", "true"], "--reboot-command does nothing without"),
    (["apply", *LAYOUT, "--state", "STATE", "--allow-reboot", "--reboot-command", "true"],
     "--reboot-command and --state contradict"),
    (["status", "--watch-for", "5"], "--watch-for does nothing without --watch"),
    (["agent", "--node-name", "n", "-f", SHIPPED, "--no-device-plugin", "--device-plugin-config-map", "a/b"],
     "--no-device-plugin and --device-plugin-config-map contradict"),
    (["agent", "--node-name", "n", "-f", SHIPPED, "--dra-selector", "app=x"], "--dra-selector does nothing without"),
]


@pytest.mark.parametrize(("argv", "says"), REFUSED, ids=[" ".join(a[:1] + [w for w in a if w.startswith("--")])
                                                         for a, _ in REFUSED])
def test_contradictory_flags_are_refused_in_one_line_with_exit_2_touching_nothing(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "node.json"
    argv = [str(state) if word == "STATE" else word for word in argv]
    with capture_logs():
        assert main(argv) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith(f"migagent {argv[0]}: {says}")
    assert captured.out == ""
    assert not state.exists()


def test_a_default_from_the_environment_does_not_contradict_a_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MIGAGENT_SIMULATE", "1xA30-24GB")
    monkeypatch.setenv("NVIDIA_DRIVER_ROOT", "/run/nvidia/driver")
    with capture_logs():
        assert main(["plan", *LAYOUT, "--gpu-model", "H100-80GB-SXM"]) == 0
    assert "GPU 0 (NVIDIA H100 80GB HBM3)" in capsys.readouterr().out
