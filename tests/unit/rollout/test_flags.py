"""Every `migagent rollout` flag is checked when it is parsed: a value no rollout can run with is one
line naming the flag and what would be valid, exit 2, before the API server is contacted at all."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from migagent.cli import build_parser, main


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """An API server address that records whether anyone connected (nothing accepts)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        yield server


START = ["rollout", "start", "r", "-l", "pool=a", "-c", "all-balanced"]
EMPTY = "an empty selector selects every node (an unset shell variable?); for that, give --all instead"
CASES = [
    ([*START, "--canary", "0"], "argument --canary: must be at least 1, got 0"),
    ([*START, "--canary", "-1"], "argument --canary: must be at least 1, got -1"),
    ([*START, "--canary", "two"], "argument --canary: expected a whole number, got 'two'"),
    ([*START, "--lease", "0"], "argument --lease: must be more than 0 seconds, got 0"),
    ([*START, "--lease", "-1"], "argument --lease: must be more than 0 seconds, got -1"),
    ([*START, "--lease", "inf"], "argument --lease: must be a finite number of seconds, got inf"),
    ([*START, "--soak", "-1"], "argument --soak: must be 0 or more seconds, got -1"),
    ([*START, "--soak", "nan"], "argument --soak: must be a finite number of seconds, got nan"),
    ([*START, "--poll", "-1"], "argument --poll: must be more than 0 seconds, got -1"),
    ([*START, "--poll", "0"], "argument --poll: must be more than 0 seconds, got 0"),
    ([*START, "--failure-budget", "0"], "argument --failure-budget: must be at least 1, got 0"),
    ([*START, "--max-unavailable", "lots"], "argument --max-unavailable: 'lots': give a positive number of GPUs"),
    ([*START, "--max-unavailable", "150%"], "argument --max-unavailable: '150%': give a positive number of GPUs"),
    ([*START, "--namespace", "Rollouts"], "argument --namespace: 'Rollouts': a namespace name is lower-case"),
    ([*START, "-f", "/nonexistent/layouts.yaml"],
     "argument -f/--layout-file: cannot read /nonexistent/layouts.yaml: No such file or directory"),
    (["rollout", "start", "My_Rollout", "-l", "pool=a", "-c", "x"], "argument NAME: 'My_Rollout': give lower-case"),
    (["rollout", "plan", "-l", "pool=a", "-c", "x", "--canary", "0"], "argument --canary: must be at least 1"),
    (["rollout", "resume", "r", "--poll", "-1"], "argument --poll: must be more than 0 seconds, got -1"),
    (["rollout", "undo", "r", "--poll", "-1"], "argument --poll: must be more than 0 seconds, got -1"),
    (["rollout", "status", "r" * 64], "argument NAME: '" + "r" * 64 + "': give lower-case"),
    (["rollout", "controller", "--poll", "-1"], "argument --poll: must be more than 0 seconds, got -1"),
    # An empty selector (an unset shell variable) would take every node: that takes --all, as kubectl drain's.
    (["rollout", "start", "r", "-l", "", "-c", "x"], f"argument -l/--selector: {EMPTY}"),
    (["rollout", "plan", "-l", " ", "-c", "x"], f"argument -l/--selector: {EMPTY}"),
    (["rollout", "start", "r", "--from-advice", "-l", ""], f"argument -l/--selector: {EMPTY}"),
    (["rollout", "start", "r", "-c", "x"], "one of the arguments -l/--selector --all is required"),
    (["rollout", "start", "r", "--all", "-l", "a=b", "-c", "x"], "argument -l/--selector: not allowed with argument"),
]


@pytest.mark.parametrize(("argv", "said"), CASES, ids=[" ".join(argv[1:2] + argv[-2:]) for argv, _ in CASES])
def test_a_bad_flag_is_one_line_and_exit_2_before_the_cluster_is_contacted(
    argv: list[str], said: str, listener: socket.socket, capsys: pytest.CaptureFixture[str]
) -> None:
    server = f"http://127.0.0.1:{listener.getsockname()[1]}"
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--api-server", server])
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"migagent rollout {argv[1]}: error: {said}"), err
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody connected


AUTOPILOT_CASES = [
    (["--poll", "0"], "argument --poll: must be more than 0 seconds, got 0"),  # a busy loop on the API server
    (["--canary", "0"], "argument --canary: must be at least 1, got 0"),
    (["--soak", "-1"], "argument --soak: must be 0 or more seconds, got -1"),
    (["--failure-budget", "0"], "argument --failure-budget: must be at least 1, got 0"),
    (["--namespace", "Migagent"], "argument --namespace: 'Migagent': a namespace name is lower-case"),
    (["-l", ""], f"argument -l/--selector: {EMPTY}"),
    (["--persist", "nan"], "argument --persist: must be a finite number of seconds, got nan"),
    (["--max-changes-per-hour", "0"], "argument --max-changes-per-hour: must be at least 1, got 0"),
]


@pytest.mark.parametrize(("flags", "said"), AUTOPILOT_CASES, ids=[" ".join(flags) for flags, _ in AUTOPILOT_CASES])
def test_the_autopilots_rollout_flags_are_held_to_the_rollouts_rules_in_one_line(
    flags: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["autopilot", "run", *flags]
    with pytest.raises(SystemExit) as exited:  # parsed only: a flag let through fails here, never runs the loop
        build_parser(argv).parse_args(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"migagent autopilot run: error: {said}"), err
