"""Real storage faults for tests, whoever runs them: a directory nobody can write (a read-only tmpfs
when we are root and may mount, else an immutable directory (chattr +i) for root, else mode 0555,
which root would write through), and a full one."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _mount_tmpfs(path: Path, options: str) -> bool:
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, check=False
    )
    return done.returncode == 0


def _unmount(path: Path) -> None:
    subprocess.run(["umount", str(path)], capture_output=True, check=False)


@contextmanager
def unwritable_directory(path: Path) -> Iterator[int]:
    """`path` (created empty) refuses every write while the block runs; yields the errno a write gets."""
    path.mkdir(parents=True, exist_ok=True)
    if _mount_tmpfs(path, "ro,size=1m"):
        try:
            yield errno.EROFS
        finally:
            _unmount(path)
        return
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False).returncode != 0:
            raise RuntimeError("running as root without mount or chattr +i: no way to make a directory unwritable")
        try:
            yield errno.EPERM
        finally:
            subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False)
        return
    path.chmod(0o555)
    try:
        yield errno.EACCES
    finally:
        path.chmod(0o755)


@contextmanager
def full_directory(path: Path, *, room: int = 0) -> Iterator[bool]:
    """`path` on a 64 KiB tmpfs filled up but for `room` bytes (True), or, where mounting is not allowed,
    unchanged (False). A tmpfs allocates whole 4 KiB pages: `room=8192` holds two small files, not three.
    `fill_up(path)` takes the rest later (a disk that fills during a run)."""
    path.mkdir(parents=True, exist_ok=True)
    if not _mount_tmpfs(path, "size=64k"):
        yield False
        return
    try:
        fill_up(path, room=room)
        yield True
    finally:
        _unmount(path)


def fill_up(path: Path, *, room: int = 0) -> None:
    """Fill the file system `path` is on but for `room` bytes (a filler file in `path`, grown to the end)."""
    fd = os.open(path / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    filled = (path / "filler").stat().st_size
    os.truncate(path / "filler", max(0, filled - room))
