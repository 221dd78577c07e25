"""Every message that names a flag names one the command showing it has: `advise` said --layouts-namespace
(its flag was --namespace) and `autopilot run` said --layouts-namespace or -f (it had neither).

The walk: every string of the product (and of the demos) that reads as a message (it has a space; a lone
"--mode" is another tool's argument) is searched for `--flags`. A flag after `migagent COMMAND` in the
same string is held to that command's parser; a flag after another tool's name (kubectl, nvidia-smi...)
is that tool's. Any other flag is held to the commands that show the module's messages: a command's own
module is its commands'; a module shared by commands says who shows it in AUDIENCE below, and a new
shared module that names a flag must be added there (the test says so)."""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterator
from pathlib import Path

from migagent.cli import build_parser
from migagent.cli.commands import all_commands

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*sorted((ROOT / "migagent").rglob("*.py")), *sorted((ROOT / "simulator/migagent_sim").glob("demo*.py"))]
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
COMMANDS = {command.name for command in all_commands()}
SPEAKER = re.compile(rf"\b(?:migagent\s+(?P<command>{'|'.join(COMMANDS)})\b|kubectl|nvidia-smi|nvidia-ctk|systemctl)")

NODE = ("export", "plan", "apply", "assert", "doctor", "host", "agent")  # --simulate, --state, --driver-root
AUDIENCE: dict[str, tuple[str, ...]] = {
    "migagent/attempt/blockers.py": ("agent",),
    "migagent/attempt/drain/gate.py": ("agent",),
    "migagent/attempt/preflight.py": ("agent",),
    "migagent/autopilot/decide.py": ("autopilot",),
    "migagent/layout/generate.py": ("apply",),  # the shipped file's header
    "migagent/kube/client.py": ("agent", "status", "rollout", "advise", "autopilot"),
    "migagent/kube/rollout_api.py": ("rollout", "advise", "autopilot"),
    "migagent/attempt/drain/drainer.py": ("agent",),
    "migagent/node/names.py": ("agent",),  # the reasons of its condition (`status` and `rollout` show them too)
    "migagent/attempt/advertise/sharing_source.py": ("agent",),
    "migagent/nvml/inspect.py": ("doctor",),
    "migagent/plumbing/serve.py": ("agent", "demo"),
    "migagent/reconcile/machine.py": ("apply", "host", "agent"),
    "migagent/reconcile/session.py": ("apply",),
    "migagent/rollout/budget.py": ("rollout", "autopilot"),
    "migagent/rollout/spec.py": ("rollout",),
    "migagent/sim/state_check.py": NODE,
    "migagent/wiring/agent.py": ("agent",),
    "migagent/cli/__init__.py": tuple(COMMANDS),
    "migagent/cli/agent_flags.py": ("agent",),
    "migagent/cli/apply_outcome.py": ("apply",),
    "migagent/cli/conflicts.py": tuple(COMMANDS),
    "migagent/cli/flags.py": ("host", "agent"),
    "migagent/cli/layout_args.py": ("validate", "plan", "apply", "assert"),
    "migagent/cli/node.py": ("apply", "host", "agent"),  # --journal-dir: the state lock's, theirs
    "migagent/cli/operator.py": ("agent",),
    "migagent/cli/rollout_flags.py": ("rollout",),
    "migagent/cli/rollout_plan.py": ("rollout",),
    "migagent/cli/rollout_status.py": ("rollout",),
    "migagent/cli/rollout_view.py": ("rollout",),
    "migagent/cli/advise_view.py": ("advise",),
    "migagent/cli/doctor_view.py": ("doctor",),
    "simulator/migagent_sim/demo_rollout.py": ("demo",),
    "simulator/migagent_sim/demo_autopilot.py": ("demo",),
}


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    found = {"--help", "--debug", "--version"}  # migagent's own, before the command
    for action in parser._actions:
        found |= set(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for verb in action.choices.values():
                found |= _flags(verb)
    return found


def _command_flags() -> dict[str, set[str]]:
    root = build_parser(None)
    commands = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    flags = {name: _flags(parser) for name, parser in commands.choices.items()}
    flags["plan+apply+assert"] = flags["plan"] | flags["apply"] | flags["assert"]
    return flags


def _audience(path: Path) -> tuple[str, ...] | None:
    """Who shows the messages of `path`: a command's own module its commands (`plan`, `apply` and `assert`
    share one: a flag of one of them, a single string being one parser's); AUDIENCE says the rest."""
    relative = path.relative_to(ROOT).as_posix()
    own = "+".join(c.name for c in all_commands()
                   if relative == ("migagent/cli/" + c.module + ".py" if "." not in c.module else
                                   "simulator/" + c.module.replace(".", "/") + ".py"))
    return (own,) if own else AUDIENCE.get(relative)


def _messages(path: Path) -> Iterator[tuple[int, str]]:
    """The strings of `path` that may be shown: not docstrings, not the flags an add_argument defines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skipped.add(id(node.value))  # a docstring, or a string alone on its line
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skipped.add(id(body[0].value))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            skipped.update(id(argument) for argument in node.args)
        if isinstance(node, ast.JoinedStr):  # an f-string is read whole, its values as {}
            skipped.update(id(part) for part in node.values)
            text = "".join(str(part.value) if isinstance(part, ast.Constant) else "{}" for part in node.values)
            if " " in text:
                yield node.lineno, text
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped \
                and " " in node.value:
            yield node.lineno, node.value


def _mentions() -> Iterator[tuple[Path, int, str, tuple[str, ...] | None]]:
    """Each flag a message names, with the commands it is held to (None: nobody said who shows it)."""
    for path in SOURCES:
        for line, text in _messages(path):
            for flag in FLAG.finditer(text):
                speakers = list(SPEAKER.finditer(text, 0, flag.start()))
                if not speakers:
                    yield path, line, flag.group(), _audience(path)
                elif speakers[-1]["command"]:
                    yield path, line, flag.group(), (speakers[-1]["command"],)


def test_every_flag_a_message_names_is_a_flag_of_each_command_that_shows_it() -> None:
    flags = _command_flags()
    mentions = list(_mentions())
    assert len(mentions) > 80  # the walk finds the messages
    undeclared = sorted({f"{path.relative_to(ROOT)}" for path, _, _, audience in mentions if audience is None})
    assert undeclared == [], "say in AUDIENCE which commands show these modules' messages"
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {flag} is not a flag of `migagent {command}`"
        for path, line, flag, audience in mentions
        for command in audience or ()
        if flag not in flags[command]
    ]
    assert wrong == []


def test_the_shared_layouts_message_names_a_flag_each_pool_command_has() -> None:
    flags = _command_flags()
    for command in ("rollout", "advise", "autopilot"):
        assert {"--layouts-namespace", "--layout-file"} <= flags[command], command
