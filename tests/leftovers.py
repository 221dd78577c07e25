"""No test may leave a thread or a log handler behind: `no_leftovers` fails the test that did.

Threads a test started get a short grace to end (one told to stop may be between two polls); one
still running after it, or a handler added to a logger and never removed, fails that test by name.
Threads and handlers of fixtures wider than a test (module, session) start before the test's
snapshot and are not its to end. pytest's own capture handlers come and go with each phase, and the
NullHandler a library puts on its logger when first imported (requests, urllib3, grpc) writes nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

from migagent_sim.deadline import Deadline

GRACE_S = 5.0
"""How long, all of them together, a test's threads get to end after it."""

Handler = tuple[str, logging.Handler]


def _handlers() -> set[Handler]:
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    return {
        (logger.name, handler)
        for logger in loggers
        if isinstance(logger, logging.Logger)
        for handler in logger.handlers
        if not type(handler).__module__.startswith("_pytest") and type(handler) is not logging.NullHandler
    }


def _still_running(threads: list[threading.Thread]) -> list[str]:
    deadline = Deadline(GRACE_S)
    for thread in threads:
        thread.join(timeout=deadline.left())
    return sorted(_describe(thread) for thread in threads if thread.is_alive())


def _describe(thread: threading.Thread) -> str:
    """The thread's name, and what it runs when the name does not say (a Timer's function, say)."""
    target = getattr(thread, "_target", None) or getattr(thread, "function", None)
    where = getattr(target, "__qualname__", None)
    if where is None or where in thread.name:
        return thread.name
    return f"{thread.name} ({type(thread).__name__} running {where})"


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    threads = set(threading.enumerate())
    handlers = _handlers()
    yield
    running = _still_running([t for t in threading.enumerate() if t not in threads])
    added = sorted(f"{name}: {type(handler).__name__}" for name, handler in _handlers() - handlers)
    problems = [f"thread(s) still running: {', '.join(running)}"] if running else []
    problems += [f"log handler(s) left on: {', '.join(added)}"] if added else []
    if problems:
        pytest.fail("the test left behind " + "; ".join(problems), pytrace=False)
