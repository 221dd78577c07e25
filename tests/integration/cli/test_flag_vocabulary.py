"""One flag vocabulary across commands: -o/--output wherever data is printed, one host-clients option
in host mode and the agent (old spellings accepted, not shown), every default in --help, and no help
text sending a reader to a flag --help does not show."""

from __future__ import annotations

import argparse
import re

import pytest

from migagent.cli import build_parser, main
from migagent.cli.commands import COMMANDS


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


SUBPARSERS = _subparsers()


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


def test_every_command_is_checked() -> None:
    assert {command.name for command in COMMANDS} <= set(SUBPARSERS)


@pytest.mark.parametrize("command", ["export", "plan", "doctor", "status"])
def test_every_command_that_prints_data_takes_dash_o_output(command: str) -> None:
    flags = {s for a in _options(SUBPARSERS[command]) if a.dest == "output" and a.help != argparse.SUPPRESS
             for s in a.option_strings}
    assert flags == {"-o", "--output"}


@pytest.mark.parametrize("command", sorted(SUBPARSERS))
def test_every_option_with_a_default_shows_it_in_help(command: str) -> None:
    parser = SUBPARSERS[command]
    formatter = parser._get_formatter()
    missing = []
    for action in _options(parser):
        if action.help == argparse.SUPPRESS or action.default in (None, False, argparse.SUPPRESS):
            continue
        shown = formatter._expand_help(action) if action.help else ""
        expanded = formatter._get_help_string(action) or ""
        if "default" not in (shown + expanded).lower():
            missing.append(action.option_strings[-1])
    assert missing == []


@pytest.mark.parametrize("command", sorted(SUBPARSERS))
def test_no_help_text_names_a_hidden_flag(command: str) -> None:
    parser = SUBPARSERS[command]
    hidden = {
        flag for a in _options(parser) if a.help == argparse.SUPPRESS for flag in a.option_strings if flag[:2] == "--"
    }
    texts = " ".join(a.help for a in parser._actions if a.help and a.help != argparse.SUPPRESS)
    texts += " " + (parser.description or "") + " " + (parser.epilog or "")
    assert {flag for flag in hidden if re.search(rf"{re.escape(flag)}\b", texts)} == set()


@pytest.mark.parametrize("command", ["host", "agent"])
def test_host_and_agent_name_the_host_gpu_clients_alike_and_keep_the_old_spellings(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = {s for a in _options(SUBPARSERS[command]) if a.help != argparse.SUPPRESS for s in a.option_strings}
    assert "--host-gpu-clients" in shown
    assert "--host-clients" not in shown
    assert SUBPARSERS[command].parse_args(["--host-clients", "a.service"]).host_gpu_clients == "a.service"
    for variable in ("MIGAGENT_HOST_GPU_CLIENTS", "MIGAGENT_HOST_CLIENTS"):
        monkeypatch.delenv("MIGAGENT_HOST_GPU_CLIENTS", raising=False)
        monkeypatch.delenv("MIGAGENT_HOST_CLIENTS", raising=False)
        monkeypatch.setenv(variable, "b.service")
        assert _subparsers()[command].parse_args([]).host_gpu_clients == "b.service"


def test_export_keeps_mig_parteds_output_format_spelling(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    state = f"{tmp_path}/node.json"
    assert main(["export", "--simulate", "1xA100-40GB", "--state", state, "--output-format", "json"]) == 0
    assert capsys.readouterr().out.lstrip().startswith("{")
    assert main(["export", "--state", state, "-o", "json"]) == 0
    assert capsys.readouterr().out.lstrip().startswith("{")
