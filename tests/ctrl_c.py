"""Ctrl-C for the processes a test starts, whatever the suite itself was started with."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def children_start_with_ctrl_c_on() -> Iterator[None]:
    """While it runs, a child starts with SIGINT at its default, even if this suite ignores it.

    A suite started in the background by a shell without job control (`(pytest &)`, `nohup` in a
    script) ignores SIGINT, its children inherit that, and a Python child then leaves Ctrl-C ignored,
    as a background job should: the test would wait forever. A handler, unlike an ignored signal, is
    not inherited across exec."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
