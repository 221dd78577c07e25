"""Signal handling for the long-running commands (`agent`, `host`)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType


@contextmanager
def signals_handled(actions: Mapping[signal.Signals, Callable[[], None]]) -> Iterator[None]:
    """Run `actions[signum]` when that signal arrives, while the block runs; restore the old handlers after.

    A handler only starts a thread: it runs on top of whatever the main thread was doing, which may
    hold the very lock that `Event.set` (or the action) needs. Outside the main thread Python allows
    no signal handlers, so the block runs unchanged (tests run commands in threads)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def later(action: Callable[[], None]) -> Callable[[int, FrameType | None], None]:
        return lambda _signum, _frame: threading.Thread(target=action, daemon=True).start()

    previous = {signum: signal.signal(signum, later(action)) for signum, action in actions.items()}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
