"""Flags shared by several commands, spelled the same everywhere (one vocabulary).

- `-o/--output FORMAT` on every command that prints data (`export`, `plan`, `doctor`, `status`);
  `export --output-format` (mig-parted's spelling) is kept as a hidden alias.
- `--host-gpu-clients UNITS` / `MIGAGENT_HOST_GPU_CLIENTS` in host mode and in the agent (mig-manager's
  gpu-clients); the older `--host-clients` / `MIGAGENT_HOST_CLIENTS` of host mode still work.
- `HelpFormatter`: every option's default is shown in `--help`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

TYPE_CHECKING = False  # as typing's, without importing typing: `migagent --version` imports this module
if TYPE_CHECKING:
    from typing import Any

HOST_CLIENTS_ENV = ("MIGAGENT_HOST_GPU_CLIENTS", "MIGAGENT_HOST_CLIENTS")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Adds `(default: X)` to an option's help unless the help already says its default, or there is
    nothing to say (no default, a switch that is off, a hidden option)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text.lower() or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return action.help
        if action.default in ("", []):
            return f"{text} (default: none)" if text else "(default: none)"
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """Every sub-command's parser: defaults shown in --help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def add_output_argument(
    parser: argparse.ArgumentParser, *, choices: Sequence[str], default: str, aliases: Sequence[str] = ()
) -> None:
    """`-o/--output` with `choices`; `aliases` are older spellings, accepted but not shown."""
    parser.add_argument("-o", "--output", choices=tuple(choices), default=default, help="output format")
    for alias in aliases:
        parser.add_argument(alias, dest="output", choices=tuple(choices), help=argparse.SUPPRESS)


def add_host_clients_argument(parser: argparse.ArgumentParser | Any, *, help_text: str) -> None:
    """`--host-gpu-clients` (env MIGAGENT_HOST_GPU_CLIENTS, or the older MIGAGENT_HOST_CLIENTS);
    `--host-clients` is a hidden alias."""
    default = next((os.environ[name] for name in HOST_CLIENTS_ENV if name in os.environ), "")
    parser.add_argument(
        "--host-gpu-clients", default=default, metavar="UNITS",
        help=f"{help_text} (env MIGAGENT_HOST_GPU_CLIENTS)",
    )
    parser.add_argument("--host-clients", dest="host_gpu_clients", metavar="UNITS", help=argparse.SUPPRESS)
