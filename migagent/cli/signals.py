"""Signal handling for the long-running commands (`agent`, `host`) and `apply` (SIGTERM, SIGINT: a safe stop)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
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

    installed = {signum: later(action) for signum, action in actions.items()}
    previous = {signum: signal.signal(signum, handler) for signum, handler in installed.items()}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if signal.getsignal(signum) is installed[signum]:  # one the block replaced itself (SIG_IGN) stays
                signal.signal(signum, handler)


@dataclass
class CtrlC:
    """The SIGINT action of a daemon: a clean stop like SIGTERM's, remembered so that afterwards the
    command ends as any command Ctrl-C stops (`interrupted`, exit 130) rather than as a finished run."""

    stop: Callable[[], None]
    seen: threading.Event = field(default_factory=threading.Event)

    def __call__(self) -> None:
        self.seen.set()
        self.stop()

    def exit_code(self) -> int:
        """0 after a SIGTERM stop; after Ctrl-C, KeyboardInterrupt for `main` to report (once cleaned up)."""
        if self.seen.is_set():
            raise KeyboardInterrupt
        return 0
