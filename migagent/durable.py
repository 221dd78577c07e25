"""Durable small files: atomic replace, fsynced appends, bounded reads, and one-line errors when the
disk says no.

The journal and the simulator's state file are written the same way: a temporary file with a
unique name in the same directory (two writers never share one), fsync, rename over the target,
fsync of the directory. A failed write removes its temporary file; one left by a killed writer is
removed at the next load (`sweep_stale_temp_files`): the writer holds an advisory lock on its
temporary file while it writes, so a file nobody holds a lock on is an orphan.

Disk errors (full, read-only, permission, file too large, a path that is a directory) become
`StorageError` naming the path and the errno, so a command reports them in one line and exits 1
rather than as an internal error.
"""

from __future__ import annotations

import errno as errno_codes
import fcntl
import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from migagent.errors import StorageError

TEMP_SUFFIX = ".tmp"
_ORPHAN_AGE_S = 2.0
"""A temporary file younger than this may belong to a writer that has not locked it yet."""


def ignore_file_size_signal() -> None:
    """Make a write past `ulimit -f` fail with EFBIG instead of killing the process with SIGXFSZ.

    Python signal handlers can only be set from the main thread; elsewhere this does nothing."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


MAX_FILE_BYTES = 16 << 20
"""The most migagent reads of one file (layout, hooks, selected-layout, sharing config, simulated node
state, journal; docs/agent.md "Size limits"): 16 times a ConfigMap's 1 MiB."""
_READ_CHUNK = 1 << 16


class FileTooLargeError(OSError):
    """A file larger than MAX_FILE_BYTES (/dev/zero, a runaway generator): an OSError (EFBIG), so every
    reader's "cannot read" message says it."""

    def __str__(self) -> str:
        return str(self.strerror)


def read_bounded(source: str | Path | BinaryIO) -> bytes:
    """A file's bytes (or an open stream's, e.g. stdin), in chunks: the limit is checked while reading,
    before memory grows, and Ctrl-C stops the read between chunks (one read of /dev/zero would not)."""
    if not isinstance(source, str | Path):
        return _read_chunks(source, str(getattr(source, "name", "input")))
    with open(source, "rb", buffering=0) as stream:
        return _read_chunks(stream, str(source))


def _read_chunks(stream: BinaryIO, name: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := stream.read(min(_READ_CHUNK, MAX_FILE_BYTES + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_FILE_BYTES:
            message = f"larger than {MAX_FILE_BYTES >> 20} MiB, the most migagent reads"
            raise FileTooLargeError(errno_codes.EFBIG, message, name)
    return b"".join(chunks)


def storage_error(what: str, path: Path, exc: OSError) -> StorageError:
    """`exc` as one line: what was written, the path, the error and its errno name."""
    code = exc.errno
    name = errno_codes.errorcode.get(code, str(code)) if code is not None else "no errno"
    reason = exc.strerror or str(exc)
    return StorageError(f"cannot write {what} {path}: {reason} ({name})", path=str(path), errno=code)


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _create_temp(path: Path) -> tuple[int, Path]:
    """A new, exclusively created and locked temporary file beside `path`."""
    prefix = _temp_prefix(path)
    for _ in range(100):
        candidate = path.with_name(f"{prefix}{os.getpid()}.{os.urandom(4).hex()}{TEMP_SUFFIX}")
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd, candidate
    raise FileExistsError(errno_codes.EEXIST, "no unique temporary file name", str(path))


def fsync_directory(directory: Path) -> None:
    """Make a rename or a new file in `directory` durable: without it a power cut can undo it."""
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directory(directory: Path) -> None:
    """`mkdir -p`, where a file in the way is ENOTDIR naming that file (mkdir itself says EEXIST, which
    misleads, or ENOTDIR naming the directory it could not make)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in (directory, *directory.parents) if p.exists() and not p.is_dir()), directory)
        raise NotADirectoryError(errno_codes.ENOTDIR, os.strerror(errno_codes.ENOTDIR), str(blocker)) from None


def refuse_directory(path: Path) -> None:
    """Raise IsADirectoryError when `path` is a directory (a rename onto it would fail oddly later)."""
    if path.is_dir():
        raise IsADirectoryError(errno_codes.EISDIR, os.strerror(errno_codes.EISDIR), str(path))


def write_atomically(
    path: Path, payload: bytes, *, what: str, sync_directory: bool = True, sync_file: bool = True
) -> None:
    """Replace `path` with `payload` so that a crash leaves the old content or the new, never a mix.

    `sync_file=False` keeps that promise for a killed process (the rename is atomic) but not for a
    power cut. Raises StorageError (path and errno) when the disk refuses; no temporary file is left."""
    try:
        make_directory(path.parent)
        refuse_directory(path)
        fd, temp = _create_temp(path)
        try:
            try:
                _write_all(fd, payload)
                if sync_file:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        if sync_directory:
            fsync_directory(path.parent)
    except OSError as exc:
        raise storage_error(what, path, exc) from exc


def append_durably(path: Path, payload: bytes, *, what: str) -> None:
    """Append `payload` to `path` and fdatasync it (the file must exist: its name is already durable)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        try:
            _write_all(fd, payload)
            os.fdatasync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise storage_error(what, path, exc) from exc


def overwrite_durably(path: Path, payload: bytes, *, offset: int, what: str) -> None:
    """Write `payload` at `offset`, inside the file's allocated length, and fdatasync it.

    Inside the length the file already has on disk, no metadata changes: the sync flushes the data
    alone, about half what an append costs (which must also commit the new length)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            if os.pwrite(fd, payload, offset) != len(payload):
                raise OSError(errno_codes.EIO, "short write", str(path))
            os.fdatasync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise storage_error(what, path, exc) from exc


def preallocate_durably(path: Path, size: int, *, what: str) -> None:
    """Make `path` `size` bytes of newlines, synced (blank lines a reader skips), ready for overwrites."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            _write_all(fd, b"\n" * size)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise storage_error(what, path, exc) from exc


def probe_room(directory: Path, sizes: Sequence[int], *, what: str) -> None:
    """Prove that files of `sizes` bytes can be written and synced in `directory` at once, then remove them.

    Catches what a later write would hit: a read-only or full file system, a directory without
    write permission, a file-size limit (`ulimit -f`) below a size. One file per size, all held
    together, as the writes they stand for will be: a file system allocates whole blocks per file."""
    probe = directory / ".migagent-probe"
    written: list[Path] = []
    try:
        make_directory(directory)
        for size in sizes:
            fd, temp = _create_temp(probe)
            written.append(temp)
            try:
                _write_all(fd, b"\0" * max(1, size))
                os.fsync(fd)
            finally:
                os.close(fd)
    except OSError as exc:
        raise storage_error(what, directory, exc) from exc
    finally:
        for temp in written:
            temp.unlink(missing_ok=True)


def sweep_stale_temp_files(path: Path) -> list[Path]:
    """Remove temporary files of `path` left by writers that died (no lock held, not brand new).

    Never raises: a sweep that cannot list or remove leaves the files for the next one."""
    removed: list[Path] = []
    prefix = _temp_prefix(path)
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not (entry.name.startswith(prefix) and entry.name.endswith(TEMP_SUFFIX)):
            continue
        candidate = Path(entry.path)
        if _is_orphan(candidate, now):
            candidate.unlink(missing_ok=True)
            removed.append(candidate)
    return removed


def _is_orphan(candidate: Path, now: float) -> bool:
    """Its writer is dead: the pid in its name is gone, or (a pid reused, say in a container) nobody
    holds its lock and it is not brand new (a live writer locks it right after creating it)."""
    if not _writer_alive(candidate.name):
        return True
    try:
        if now - candidate.stat().st_mtime < _ORPHAN_AGE_S:
            return False
        fd = os.open(candidate, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # a live writer holds it
    finally:
        os.close(fd)
    return True


def _writer_alive(name: str) -> bool:
    """Whether the process whose pid the temporary file's name holds may still be running."""
    parts = name[: -len(TEMP_SUFFIX)].rsplit(".", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return True  # not our naming: judge by the lock alone
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True
