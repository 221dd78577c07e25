"""The CLI as a process: what it imports, Ctrl-C, a closed stdout, a corrupt kubeconfig. Each runs
`python -m migagent` in a child process, as a user's shell would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from migagent.cli import build_parser, main
from migagent.cli.commands import all_commands
from tests.ctrl_c import children_start_with_ctrl_c_on

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = str(ROOT / "configs/mig-layouts/mig-layouts.yaml")


def _imported_top_level_packages(*argv: str) -> set[str]:
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "migagent", *argv],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in run.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def test_validate_of_the_shipped_file_imports_no_kubernetes_module() -> None:
    imported = _imported_top_level_packages("validate", "-f", SHIPPED)
    assert "migagent" in imported  # the parse of -X importtime's output found something
    assert "kubernetes" not in imported
    assert "grpc" not in imported
    assert "prometheus_client" not in imported


def test_offline_plan_and_version_import_no_kubernetes_module() -> None:
    plan = _imported_top_level_packages(
        "plan", "-f", SHIPPED, "-c", "all-balanced", "--gpu-model", "H100-80GB-SXM", "--output", "json"
    )
    assert "kubernetes" not in plan
    version = _imported_top_level_packages("--version")
    assert "kubernetes" not in version
    assert "structlog" not in version
    # The flag-conflict check (dataclasses, typing) is imported only once a command is parsed.
    assert "dataclasses" not in version
    assert "typing" not in version


@pytest.mark.parametrize(
    "argv",
    [
        ("apply", "--simulate", "1xA30-24GB", "-f", SHIPPED, "-c", "all-disabled"),
        ("assert", "--simulate", "1xA30-24GB", "-f", SHIPPED, "-c", "all-disabled"),
        ("export", "--simulate", "1xA30-24GB"),
        ("host", "--help"),
    ],
)
def test_node_commands_without_kubernetes_import_no_kubernetes_module(argv: tuple[str, ...]) -> None:
    imported = _imported_top_level_packages(*argv)
    assert "pynvml" in imported  # they did reach the node's code
    assert "kubernetes" not in imported


def test_help_lists_every_command_without_importing_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    listing = capsys.readouterr().out
    assert all(f"    {command.name}" in listing for command in all_commands())
    assert "    demo" in listing  # added by the simulator distribution through its entry point


def test_each_command_registers_under_its_own_name_with_its_summary() -> None:
    """The lazy table and the modules agree: parsing `<name> --help`'s parser finds the real command."""
    for command in all_commands():
        parser = build_parser([command.name])
        subparsers = next(a for a in parser._actions if a.dest == "command")
        real = subparsers.choices[command.name]  # type: ignore[index]
        assert real.add_help, f"{command.name} was registered only as a placeholder"
        assert any(c.help == command.summary for c in subparsers._choices_actions)  # type: ignore[attr-defined]


def test_ctrl_c_while_a_command_waits_on_its_input_exits_130_with_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "layouts.fifo"
    os.mkfifo(fifo)
    with children_start_with_ctrl_c_on():
        child = subprocess.Popen(
            [sys.executable, "-m", "migagent", "validate", "-f", str(fifo)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )
    # Opening the FIFO for writing succeeds only once the child has it open for reading; then the
    # child blocks reading the file, as it would on a slow NFS mount, until Ctrl-C.
    writer = None
    for _ in range(6000):
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            _pause_while_running(child)
    assert writer is not None, "the child never opened its layout file"
    try:
        # Ctrl-C once the child sleeps in read(2). Sent while it is between open(2) and read(2), Python
        # only notes the signal, and read(2) then blocks with the note unread until a second Ctrl-C: a
        # person would press it again, and the test would wait forever.
        _wait_until_sleeping_in_pipe_read(child)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        os.close(writer)
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 130
    assert out == ""
    assert err.splitlines() == ["migagent validate: interrupted"]


def _wait_until_sleeping_in_pipe_read(child: subprocess.Popen[str]) -> None:
    """Until the kernel says the child waits in a pipe read (its FIFO's; `pipe_read`, `anon_pipe_read`
    since Linux 6.x), or fail after 60 s."""
    wchan = Path(f"/proc/{child.pid}/wchan")
    for _ in range(6000):
        if wchan.read_text().endswith("pipe_read"):
            return
        _pause_while_running(child)
    pytest.fail(f"the child never blocked reading its layout file (wchan {wchan.read_text()!r})")


def _pause_while_running(child: subprocess.Popen[str]) -> None:
    """10 ms, failing the test if the child ended meanwhile."""
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.01)


def test_ctrl_c_stops_host_mode_cleanly_then_exits_130_with_one_line(tmp_path: Path) -> None:
    selected = tmp_path / "migagent.env"
    selected.write_text("MIGAGENT_LAYOUT=all-1g.10gb\n")
    argv = ["host", "--simulate", "1xH100-80GB-SXM", "--state", str(tmp_path / "n.json"), "-f", SHIPPED,
            "--selected-layout-file", str(selected)]
    with subprocess.Popen(
        [sys.executable, "-m", "migagent", *argv],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    ) as child:
        assert child.stderr is not None
        for line in child.stderr:  # JSON logs (stderr is a pipe): wait until the layout is applied
            if '"host_layout_applied"' in line:
                break
        else:
            raise AssertionError(f"host mode ended before applying: rc={child.wait()}")
        child.send_signal(signal.SIGINT)
        rest = child.stderr.read().splitlines()
        assert child.wait(timeout=60) == 130
    assert '"host_mode_stopped"' in rest[-2]  # the same clean stop as SIGTERM's
    assert rest[-1] == "migagent host: interrupted"


def test_a_closed_stdout_exits_quietly_with_the_shells_sigpipe_status() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte, as `| head -c0` would leave it
    try:
        run = subprocess.run(
            [sys.executable, "-m", "migagent", "plan", "-f", SHIPPED, "-c", "all-balanced",
             "--gpu-model", "H100-80GB-SXM", "--output", "json"],
            stdout=write_end, stderr=subprocess.PIPE, text=True, check=False, cwd=ROOT,
        )
    finally:
        os.close(write_end)
    assert run.stderr == ""
    assert run.returncode == 141


@pytest.mark.parametrize(
    ("content", "names"),
    [
        ("clusters: [unclosed\n", "while parsing"),
        ("- a list, not a mapping\n", "not a kubeconfig"),
        ("apiVersion: v1\nclusters: 5\n", "not a kubeconfig"),
        ("", "is empty"),
    ],
)
def test_a_corrupt_kubeconfig_is_one_line_naming_the_file_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, names: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(content)
    code = main(["status", "--kubeconfig", str(kubeconfig)])
    err = capsys.readouterr().err
    assert code == 1
    assert len(err.splitlines()) == 1
    assert "internal error" not in err
    assert f"kubeconfig {kubeconfig}" in err
    assert names in err
    assert "fix that file or pass another with --kubeconfig" in err


# Ctrl-C at a set point of the CLI's import: a meta-path finder that signals its own process when
# `migagent.cli` is first looked for (Python raises KeyboardInterrupt at the next bytecode, inside the import).
_CTRL_C_DURING_CLI_IMPORT = """import os, signal, sys

class _CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "migagent.cli":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, _CtrlC())
"""


def test_ctrl_c_while_the_console_script_imports_the_cli_is_one_line_and_130(tmp_path: Path) -> None:
    """Issue 37 item 15: a SIGINT in the first ~70 ms printed a traceback from the script's import line."""
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]["migagent"]
    module, function = entry.split(":")
    script = f"import sys\nfrom {module} import {function}\nsys.exit({function}())\n"  # what pip writes, in short
    (tmp_path / "sitecustomize.py").write_text(_CTRL_C_DURING_CLI_IMPORT, encoding="utf-8")
    paths = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    with children_start_with_ctrl_c_on():
        done = subprocess.run([sys.executable, "-c", script, "--version"], capture_output=True, text=True,
                              check=False, cwd=ROOT, timeout=120, env={**os.environ, "PYTHONPATH": paths})
    assert (done.returncode, done.stderr, done.stdout) == (130, "migagent: interrupted\n", "")
