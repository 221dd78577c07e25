"""Composition root: the only place that reads flags and environment and wires adapters together.

Each sub-command lives in its own module exposing `register(subparsers)`; the handler it sets
returns the process exit code. Errors migagent raises on purpose become one clear line on stderr
and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import io
import os
import select
import sys
from collections.abc import Sequence

from migagent import __version__
from migagent.cli import commands
from migagent.cli.flags import Parser
from migagent.errors import MigAgentError

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports `yes | head`'s writer


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: only the command it names is imported (see `commands`); all without it."""
    parser = Parser(prog="migagent", description="Node-level MIG partition manager.")
    parser.add_argument("--version", action="version", version=f"migagent {__version__}")
    parser.add_argument("-d", "--debug", action="store_true", help="verbose logs (env MIG_PARTED_DEBUG)")
    # Every command's parser is a Parser (defaults shown in --help); typed as the base class it is.
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    commands.register_commands(subparsers, argv=argv)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):  # a name PYTHONIOENCODING=ascii cannot show is printed escaped
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        try:
            return _main(words)
        finally:  # also after argparse's --help: flushed here, not at exit, so a closed stdout is caught below
            sys.stdout.flush()
    except KeyboardInterrupt:  # Ctrl-C anywhere, even while a command's modules are still importing
        print(f"{_prefix(words)}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        if not _stdout_is_closed():
            raise
        return EXIT_BROKEN_PIPE


def _main(words: list[str]) -> int:
    if commands.requested_command(words) is None and "--version" in words:
        # What argparse would print, without registering the commands (which reads the installed
        # distributions' entry points): `--version` is what probes and scripts run most.
        print(f"migagent {__version__}")
        return 0
    # Imported here, not at the top: `--version` needs neither (logging alone is ~5 ms to import).
    import logging  # noqa: PLC0415

    from migagent.cli.conflicts import ConflictingFlagsError, check_conflicts  # noqa: PLC0415
    from migagent.cli.values import env_flag  # noqa: PLC0415
    from migagent.durable import ignore_file_size_signal  # noqa: PLC0415

    ignore_file_size_signal()  # past `ulimit -f` a write fails with EFBIG, reported in one line, not a core dump
    try:  # a flag's default from the environment (MIGAGENT_ALLOW_REBOOT=banana) is read while parsing
        args = build_parser(words).parse_args(words)
        debug = bool(args.debug) or env_flag("MIG_PARTED_DEBUG")
    except MigAgentError as exc:
        print(f"{_prefix(words)}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # structlog is imported here, not at the top: `--version` and `--help` need none of it.
    from migagent.plumbing.logging import configure_logging  # noqa: PLC0415

    # Sub-commands that run as daemons set `log_level` (INFO) with set_defaults; one-shot ones log warnings.
    level = logging.DEBUG if debug else getattr(args, "log_level", logging.WARNING)
    configure_logging(
        json_logs=getattr(args, "json_logs", None), level=level, progress=getattr(args, "progress", False)
    )
    try:
        check_conflicts(args)
        code: int = args.handler(args)
    except ConflictingFlagsError as exc:
        print(f"migagent {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MigAgentError as exc:
        print(f"migagent {args.command}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except (KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as exc:  # a bug, not bad input: say so in one line; --debug shows the traceback
        if debug:
            raise
        print(f"migagent {args.command}: internal error: {type(exc).__name__}: {exc} (run with --debug for details)",
              file=sys.stderr)
        return EXIT_INTERNAL
    return code


def _prefix(words: Sequence[str]) -> str:
    command = commands.requested_command(words)
    known = any(candidate.name == command for candidate in commands.all_commands())
    return f"migagent {command}" if known else "migagent"


def _stdout_is_closed() -> bool:
    """Whether the reader of stdout went away (`migagent plan ... | head -c1`): poll reports an error
    on the write end of a pipe whose read end is closed. If so, point stdout at /dev/null so that the
    interpreter's own flush at exit does not raise again. A broken pipe that came from elsewhere (a
    socket) is not this and stays an error."""
    try:
        descriptor = sys.stdout.fileno()
    except (OSError, ValueError):  # not a real file (a test's capture)
        return False
    poller = select.poll()
    poller.register(descriptor, select.POLLOUT)
    if not any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0)):
        return False
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    return True


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
