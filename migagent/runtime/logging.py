"""structlog setup, called once by the CLI: JSON lines for daemons, readable console lines on a terminal.

Logs always go to stderr so that command output on stdout (plans, exported YAML) stays clean.
"""

from __future__ import annotations

import logging
import sys

import structlog


def _stderr_logger(*_args: object) -> structlog.PrintLogger:
    return structlog.PrintLogger(file=sys.stderr)


def configure_logging(*, json_logs: bool | None = None, level: int = logging.WARNING) -> None:
    """json_logs None means: JSON unless stderr is a terminal. One-shot commands log warnings only
    (mig-parted prints its details only with --debug); daemons pass INFO."""
    use_json = (not sys.stderr.isatty()) if json_logs is None else json_logs
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # Resolved at each log call, not at configure time: sys.stderr may be swapped (tests, daemons).
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
