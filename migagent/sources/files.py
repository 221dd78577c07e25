"""Desired layout from files: the layout file and the selected-layout file, watched for changes.

The selected layout is the `MIGAGENT_LAYOUT=<name>` line of /etc/migagent/migagent.env, the same
file both systemd units load with EnvironmentFile=, so a boot-time apply and host mode always agree
on what is selected (systemd/README.md). It is read here with the part of systemd's EnvironmentFile
syntax such a file needs: `KEY=VALUE` lines, `#`/`;` comments, optional matching quotes; the last
assignment wins.

The watch is on the files' *directories*: editors and configuration tools replace a file by
renaming a new one over it, and Kubernetes ConfigMap volumes swap a `..data` symlink, and neither
is seen by a watch on the old file itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

import structlog
from watchdog.events import (
    EVENT_TYPE_CLOSED,
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from migagent.durable import read_bounded
from migagent.errors import InvalidLayoutError, PermanentError

SELECTED_LAYOUT_VARIABLE = "MIGAGENT_LAYOUT"

# Reads (opened / closed_no_write) are left out: the agent reads these files itself after every
# change, and reacting to its own reads would loop forever.
_CHANGES = {EVENT_TYPE_CREATED, EVENT_TYPE_MODIFIED, EVENT_TYPE_MOVED, EVENT_TYPE_DELETED, EVENT_TYPE_CLOSED}

log = structlog.get_logger(__name__)


def read_selected_layout(path: Path, *, variable: str = SELECTED_LAYOUT_VARIABLE) -> str | None:
    """The layout name assigned to `variable` in `path`; None when the file or the line is absent
    (then only a layout file holding a single config can be applied); "" when the line assigns
    nothing (`MIGAGENT_LAYOUT=`, as shipped): the admin has not chosen yet, so nothing is applied."""
    try:
        text = read_bounded(path).decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidLayoutError(f"{path}: cannot read the selected-layout file: {exc}") from exc
    value: str | None = None
    for line in text.splitlines():
        key, sep, raw = line.strip().partition("=")
        if sep and not key.startswith(("#", ";")) and key.strip() == variable:
            value = _unquote(raw.strip())
    return value


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


class ChangeHandler(FileSystemEventHandler):
    """Calls `on_change` for writes, creations, deletions and renames touching `names` (or a `..`
    entry, as Kubernetes volume updates use); ignores everything else."""

    def __init__(self, names: frozenset[str], on_change: Callable[[], None]) -> None:
        super().__init__()
        self._names = names
        self._on_change = on_change

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in _CHANGES:
            return
        touched = {_name(event.src_path), _name(event.dest_path)}
        if touched & self._names or any(name.startswith("..") for name in touched):
            log.debug("watched_file_changed", kind=event.event_type, path=_text(event.src_path))
            self._on_change()


def _text(path: bytes | str) -> str:
    return path.decode(errors="replace") if isinstance(path, bytes) else path


def _name(path: bytes | str) -> str:
    return Path(_text(path)).name if path else ""


class FileWatch:
    """Calls `on_change()` (from the observer's thread) whenever one of `paths` may have changed.

    Calls are not debounced: one edit can produce several events; the receiver coalesces them.
    """

    def __init__(self, paths: Sequence[Path], *, on_change: Callable[[], None]) -> None:
        self._paths = tuple(paths)
        self._on_change = on_change
        self._observer: BaseObserver | None = None

    def start(self) -> None:
        directories, names = _watch_targets(self._paths)
        observer = Observer()
        handler = ChangeHandler(names, self._on_change)
        for directory in sorted(directories):
            observer.schedule(handler, str(directory), recursive=False)
        observer.daemon = True
        observer.start()
        self._observer = observer
        log.info("file_watch_started", directories=[str(d) for d in sorted(directories)])

    def stop(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join()

    def __enter__(self) -> FileWatch:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _watch_targets(paths: Sequence[Path]) -> tuple[set[Path], frozenset[str]]:
    """The directories to watch and the file names that matter in them, following symlinks too."""
    directories: set[Path] = set()
    names: set[str] = set()
    for path in paths:
        for candidate in {path.absolute(), path.resolve()}:
            directories.add(candidate.parent)
            names.add(candidate.name)
    for directory in directories:
        if not directory.is_dir():
            raise PermanentError(
                f"cannot watch {directory}: it is not an existing directory; create it or point the"
                " layout / selected-layout file options at files in an existing directory"
            )
    return directories, frozenset(names)
