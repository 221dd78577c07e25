"""The list of sub-commands, in the order `migagent --help` shows them, and their lazy registration.

Each command's module exposes a registrar `register...(subparsers)`. Listing them here by module
name (rather than importing them) lets `main` import only the module of the command it runs: the
Kubernetes client alone takes over a second to import, and `validate` or `plan` never talk to
Kubernetes. The other commands get a placeholder parser carrying just their one-line help, so
`migagent --help` still lists every command.

Other distributions add commands through the `migagent.commands` entry-point group: each entry
point names a `Command` in a module light enough to import for `--help`. The simulator
(`migagent_sim`) adds `demo` this way, so the product never imports it.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence

Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


class Command:
    """A command's name, where its registrar is, and its one-line help. A plain class, not a dataclass:
    `dataclasses` imports `inspect`, a good part of what `migagent --version` would otherwise load."""

    __slots__ = ("module", "name", "registrar", "summary")

    def __init__(self, name: str, module: str, registrar: str, summary: str) -> None:
        self.name = name
        self.module = module  # the module that holds the registrar: a name under migagent.cli, or a dotted path
        self.registrar = registrar  # the function in that module that adds this command's parser
        self.summary = summary  # the line `migagent --help` shows


COMMANDS: tuple[Command, ...] = (
    Command("validate", "validate", "register", "check a layout file's format, resolution and fit, offline"),
    Command("export", "export", "register", "print the node's current MIG layout as a mig-parted v1 file"),
    Command("plan", "apply", "register_plan", "show the steps an apply would run, without running them"),
    Command("apply", "apply", "register_apply", "make the node's MIG layout match the selected config"),
    Command(
        "assert", "apply", "register_assert", "exit 0 when the selected config is applied on the GPUs it covers"
    ),
    Command(
        "host", "host", "register", "keep applying the selected layout as the layout files change (systemd host mode)"
    ),
    Command(
        "agent", "agent", "register",
        "Kubernetes node agent: apply the layout the node label nvidia.com/mig.config names",
    ),
    Command(
        "doctor", "doctor", "register",
        "report, read-only, what NVML says about each GPU's MIG support and how it differs from the catalog",
    ),
    Command("status", "status", "register", "one table for the fleet: each MIG node's layout, state and devices"),
    Command(
        "rollout", "rollout", "register",
        "change the layout of a node pool in waves, budgeted in GPUs and PDBs, with a canary, a halt and a resume",
    ),
    Command(
        "advise", "advise", "register",
        "which layout changes would let the pending GPU pods run, and at what price (evictions, GPUs changed)",
    ),
    Command(
        "autopilot", "autopilot", "register",
        "opt-in: change layouts to follow persistent demand, within guardrails; its history, pause and resume",
    ),
)


ENTRY_POINT_GROUP = "migagent.commands"


def plugin_commands() -> tuple[Command, ...]:
    """The commands other installed distributions add (the simulator's `demo`), sorted by name."""
    # Imported only here: reading entry points costs more than the rest of `migagent --version`.
    from importlib.metadata import entry_points  # noqa: PLC0415

    found = [entry.load() for entry in entry_points(group=ENTRY_POINT_GROUP)]
    return tuple(sorted((command for command in found if isinstance(command, Command)), key=lambda c: c.name))


def all_commands() -> tuple[Command, ...]:
    return COMMANDS + plugin_commands()


def summary(name: str) -> str:
    """The one-line help of command `name`, for its own registrar to pass to `add_parser`."""
    return next(command.summary for command in all_commands() if command.name == name)


def registrar_of(command: Command) -> Registrar:
    module = importlib.import_module(command.module if "." in command.module else f"migagent.cli.{command.module}")
    registrar: Registrar = getattr(module, command.registrar)
    return registrar


def requested_command(argv: Sequence[str]) -> str | None:
    """The sub-command `argv` names: its first word that is not an option (the top-level options take
    no values), or None (e.g. `migagent --help`)."""
    return next((word for word in argv if not word.startswith("-")), None)


def register_commands(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], *, argv: Sequence[str] | None
) -> None:
    """Add every command. Given the command line `argv`, only the command it names is imported and
    registered fully, the rest as placeholders; without it (tests parsing many command lines), all."""
    wanted = None if argv is None else requested_command(argv)
    for command in all_commands():
        if argv is None or command.name == wanted:
            registrar_of(command)(subparsers)
        else:
            subparsers.add_parser(command.name, help=command.summary, add_help=False)
