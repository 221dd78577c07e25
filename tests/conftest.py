"""Suite-wide fixtures."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog


def _log_through_pytest() -> None:
    """structlog's events go to the standard `logging` module, which pytest captures per test (shown
    under a failed test's "Captured log") and drops between tests. structlog's own default prints to
    whatever sys.stdout is: an agent thread still logging after its test ended (a join that timed out,
    a daemon thread) wrote into the run's progress output."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.StackInfoRenderer(),
            structlog.dev.set_exc_info,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.NOTSET),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )


_log_through_pytest()


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """`migagent.cli.main` configures structlog globally (level, renderer) and adds its stderr handler
    to the root logger; undo both after each test, so a CLI test can neither hide the info events
    another test reads with `structlog.testing.capture_logs` nor leave a handler printing to the
    terminal."""
    yield
    _log_through_pytest()
    root = logging.getLogger()
    for handler in [h for h in root.handlers if type(h).__module__.startswith("migagent")]:
        root.removeHandler(handler)
