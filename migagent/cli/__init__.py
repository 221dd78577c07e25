"""Composition root: the only place that reads flags and environment and wires adapters together.

Each sub-command lives in its own module exposing `register(subparsers)`; the handler it sets
returns the process exit code. Errors migagent raises on purpose become one clear line on stderr
and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from migagent import __version__
from migagent.cli import commands
from migagent.errors import MigAgentError
from migagent.runtime.logging import configure_logging

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 70


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="migagent", description="Node-level MIG partition manager.")
    parser.add_argument("--version", action="version", version=f"migagent {__version__}")
    parser.add_argument("-d", "--debug", action="store_true", help="verbose logs (env MIG_PARTED_DEBUG)")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in commands.REGISTRARS:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = bool(args.debug) or os.environ.get("MIG_PARTED_DEBUG", "").lower() in ("1", "true")
    # Sub-commands that run as daemons set `log_level` (INFO) with set_defaults; one-shot ones log warnings.
    level = logging.DEBUG if debug else getattr(args, "log_level", logging.WARNING)
    configure_logging(json_logs=getattr(args, "json_logs", None), level=level)
    try:
        code: int = args.handler(args)
    except MigAgentError as exc:
        print(f"migagent {args.command}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug, not bad input: say so in one line; --debug shows the traceback
        if debug:
            raise
        print(f"migagent {args.command}: internal error: {type(exc).__name__}: {exc} (run with --debug for details)",
              file=sys.stderr)
        return EXIT_INTERNAL
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
