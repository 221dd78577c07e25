"""structlog setup, called once by the CLI: JSON lines for daemons, readable console lines on a terminal.

Logs always go to stderr so that command output on stdout (plans, exported YAML) stays clean.
Records of libraries that log through the standard `logging` module (the Kubernetes client,
urllib3, the simulator) are rendered by the same renderer, so a daemon's log is JSON throughout
and a log collector never meets a stray plain-text line.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO, cast

import structlog

from migagent.plumbing.progress_log import keep_progress_events, with_progress_lines

# Added to every event, whether from structlog or from a standard-library logger.
_SHARED_PROCESSORS: tuple[structlog.typing.Processor, ...] = (
    structlog.contextvars.merge_contextvars,
    structlog.processors.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
)


class _CurrentStderr:
    """sys.stderr as it is at each write. A logger is made once per `bind` (an attempt binds its node and
    layout when it starts), so a logger made with the stream itself kept it for the whole attempt, and
    wrote into it after it was swapped and closed (pytest's capsys at the end of a test): the attempt's
    thread died on "I/O operation on closed file"."""

    def write(self, text: str) -> int:
        stream = sys.stderr
        try:
            return stream.write(text)
        except ValueError:
            if sys.stderr is stream:  # closed and still the stream: a real failure, said as it is
                raise
            return sys.stderr.write(text)  # swapped and closed between the look and the write

    def flush(self) -> None:
        stream = sys.stderr
        if not stream.closed:
            stream.flush()


_CURRENT_STDERR = cast(TextIO, _CurrentStderr())


def _stderr_logger(*_args: object) -> structlog.WriteLogger:
    """One write per line (PrintLogger's `print` makes two: the text, then the newline), so a line another
    thread writes at that moment (apply's "stopping after the step in progress") never lands inside it."""
    return structlog.WriteLogger(file=_CURRENT_STDERR)


class _StderrHandler(logging.Handler):
    """Writes to whatever sys.stderr is at the time of the record (tests and daemons may swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def configure_logging(*, json_logs: bool | None = None, level: int = logging.WARNING, progress: bool = False) -> None:
    """json_logs None means: JSON unless stderr is a terminal. One-shot commands log warnings only
    (mig-parted prints its details only with --debug); daemons pass INFO. `progress`: the engine's
    step events pass even below `level` (`apply`, see progress_log)."""
    use_json = (not sys.stderr.isatty()) if json_logs is None else json_logs
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if use_json
        else with_progress_lines(structlog.dev.ConsoleRenderer(colors=False))
    )
    structlog.configure(
        processors=[
            keep_progress_events(level, progress=progress),
            *_SHARED_PROCESSORS,
            structlog.processors.format_exc_info,
            renderer,
        ],
        # INFO at least, so that progress events reach `keep_progress_events`, which drops the rest below `level`.
        wrapper_class=structlog.make_filtering_bound_logger(min(level, logging.INFO)),
        # sys.stderr at each write, not at configure time: it may be swapped (tests, daemons).
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    _route_standard_logging(renderer, debug=level <= logging.DEBUG)


def _route_standard_logging(renderer: structlog.typing.Processor, *, debug: bool) -> None:
    """Send standard-library log records through `renderer`. Libraries speak at WARNING and above
    (their INFO is chatter about connections), everything with --debug."""
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*_SHARED_PROCESSORS, structlog.stdlib.add_logger_name],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = _StderrHandler()
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:  # configured again: replace
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)


def reset_logging() -> None:
    """Undo `configure_logging`: structlog back to its defaults, our stderr handler off the root logger
    (for a process that runs the CLI in-process more than once, as the test suite does)."""
    structlog.reset_defaults()
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(old)
