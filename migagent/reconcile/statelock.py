"""One writer of the node's MIG state: an exclusive `flock` on the state/journal directory.

Host mode, the agent and `migagent apply` all journal into the same directory (/var/lib/migagent by
default); two of them driving NVML at once would clobber each other's journal and GPUs. Each takes
this lock before it touches anything and holds it for its life (`apply` for its run). `flock` locks
belong to the open file: the kernel drops them when the holder dies, even by SIGKILL, so a crash
never leaves a stale lock. The holder writes its pid and command into the lock file, so whoever has
to wait can say whom it waits for.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from pathlib import Path

import structlog

from migagent.clock import Clock
from migagent.durable import make_directory, read_bounded, storage_error
from migagent.errors import MigAgentError
from migagent.retrying import poll_until

LOCK_FILE = ".migagent.lock"

log = structlog.get_logger(__name__)


class StateLockedError(MigAgentError):
    """Another process holds the state lock; the message names it (pid and command) and the lock file."""

_UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT})
_NO_FILE = -1
"""The lock's stand-in on a directory that cannot be written (see try_acquire)."""


class StateLock:
    def __init__(self, directory: Path, *, command: str) -> None:
        self.path = directory / LOCK_FILE
        self._command = command
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        try:
            make_directory(self.path.parent)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if exc.errno not in _UNWRITABLE:  # a directory that cannot be: a file in the way, a path under /proc
                raise storage_error("the state directory", Path(exc.filename or self.path), exc) from exc
            # A directory nobody can write holds no journal either: the storage check refuses every
            # change there (StorageUnwritable) before the node is touched, so no lock is needed to stay safe.
            log.warning("state_lock_unwritable", path=str(self.path), error=errno.errorcode.get(exc.errno or 0, ""))
            self._fd = _NO_FILE
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid={os.getpid()} command={self._command}\n".encode(), 0)
        except OSError as exc:  # a full disk: the lock holds all the same, only its holder goes unnamed
            code = errno.errorcode.get(exc.errno or 0, "")
            log.warning("state_lock_holder_unwritten", path=str(self.path), error=code)
        self._fd = fd
        log.info("state_lock_taken", path=str(self.path))
        return True

    def acquire(
        self, *, timeout_s: float, clock: Clock, stop: threading.Event | None = None, poll_s: float = 0.2
    ) -> None:
        """Take the lock, waiting up to `timeout_s`; StateLockedError naming the holder after that."""
        if self.try_acquire():
            return
        if timeout_s > 0:
            log.warning("state_lock_busy", path=str(self.path), holder=self.holder(), wait_s=timeout_s)
            _, taken = poll_until(
                lambda: True if self.try_acquire() else None, clock=clock, timeout_s=timeout_s, interval_s=poll_s,
                stop=stop,
            )
            if taken:
                return
        raise StateLockedError(
            f"another MIG manager holds the state lock {self.path} ({self.holder()})"
            + (f"; waited {timeout_s:g}s" if timeout_s > 0 else "")
            + ": try again when it has finished"
        )

    def holder(self) -> str:
        """What the lock file says about its holder ("pid=N command=..."), or that it says nothing."""
        try:
            text = read_bounded(self.path).decode("utf-8", errors="replace").strip()
        except OSError:
            text = ""
        return text or "holder unknown"

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None or fd == _NO_FILE:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
