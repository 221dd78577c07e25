"""One parser per kind of value, used by every command (cli/values.py): each flag that takes seconds
refuses `nan`, `inf` and `-5` (`--lock-timeout nan` was accepted), each boolean from the environment
refuses what Go's ParseBool would (`MIGAGENT_ALLOW_REBOOT=banana` was taken as false, while
`MIG_PARTED_SKIP_RESET=maybe` was refused), and an empty MIG_PARTED_SELECTED_CONFIG says so."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from migagent.cli import build_parser, main

SHIPPED = str(Path(__file__).resolve().parents[2] / "configs/mig-layouts/mig-layouts.yaml")


def _actions(parser: argparse.ArgumentParser, prog: str) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, f"{prog} {name}")
        else:
            yield prog, action


def _seconds_flags() -> list[tuple[str, argparse.Action]]:
    return [(prog, action) for prog, action in _actions(build_parser(None), "migagent") if action.metavar == "SECONDS"]


def test_every_flag_that_takes_seconds_refuses_nan_infinity_and_negatives() -> None:
    flags = _seconds_flags()
    assert len(flags) > 25  # the walk finds them: the agent's, host mode's, the rollout's, the autopilot's, ...
    let_through = []
    for prog, action in flags:
        assert callable(action.type), (prog, action.option_strings)
        for text in ("nan", "inf", "-5"):
            try:
                action.type(text)
            except argparse.ArgumentTypeError:
                continue
            let_through.append(f"{prog} {action.option_strings[-1]} {text}")
    assert let_through == []


def test_every_port_flag_refuses_a_port_past_65535() -> None:
    actions = _actions(build_parser(None), "migagent")
    ports = [(prog, action) for prog, action in actions if action.dest.endswith("port")]
    assert {prog for prog, _ in ports} >= {"migagent agent", "migagent demo"}
    for _prog, action in ports:
        assert callable(action.type)
        with pytest.raises(argparse.ArgumentTypeError, match=r"a port is 0 \(any free one\) to 65535, got 99999"):
            action.type("99999")


@pytest.mark.parametrize(("variable", "value"), [("MIGAGENT_ALLOW_REBOOT", "banana"),
                                                  ("MIG_PARTED_SKIP_RESET", "maybe"),
                                                  ("MIG_PARTED_MODE_CHANGE_ONLY", "2"),
                                                  ("MIG_PARTED_DEBUG", "verbose")])
def test_a_boolean_from_the_environment_is_refused_alike_whatever_reads_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    assert main(["apply", "--simulate", "1xA30-24GB", "-f", SHIPPED, "-c", "all-disabled"]) == 2
    assert capsys.readouterr().err == (
        f"migagent apply: environment variable {variable}={value!r}: expected true or false (1, t, yes, on; 0, f,"
        " no, off)\n"
    )


def test_an_empty_selected_config_says_it_is_empty(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MIG_PARTED_SELECTED_CONFIG", "")
    assert main(["apply", "--simulate", "1xA30-24GB", "-f", SHIPPED]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"migagent apply: {SHIPPED}: the selected config name is empty; choose one of 78 configs:")
