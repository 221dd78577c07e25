"""The write-ahead journal: what an apply was doing, so that a restarted engine can carry on safely.

The engine writes "about to run step i" before it touches the GPU and "step i done" after verifying
it. On disk that costs a constant per step, whatever the plan's size: the whole record, plan
included, is written once per attempt to `journal.json` (atomically: a uniquely named temporary
file, fsync, rename, fsync of the directory), and each later record that differs from it only in
its step index is one short line appended to `journal.log` and fdatasynced. A line names the
record it refines by a token, so a log left from an older record is ignored; a line torn by a
crash does not parse and is ignored too, leaving the step before it (steps are idempotent and
checked against the node, so resuming one step early is safe). The log is written out as blank
lines, one 64-byte slot per step, when the record is written, and each step's line overwrites its
slot: a sync then flushes the data alone, not a new file length as an append would (about half
the cost), and a step's line can no longer fail for want of space.

The journal is an optimisation and a memory of failures, not the source of truth: every step is
checked against a fresh observation before it runs, so a record that cannot be read (any JSON that
is not a journal record, any garbage) is dropped with a warning and the engine observes and plans
again. A journal that cannot be *written* is a StorageError naming the path and the errno; the
agent checks for that (`check_writable`) before it touches the Node.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import structlog

from migagent.durable import (
    append_durably,
    fsync_directory,
    overwrite_durably,
    preallocate_durably,
    probe_room,
    read_bounded,
    refuse_directory,
    storage_error,
    sweep_stale_temp_files,
    write_atomically,
)
from migagent.jsontext import decode_json
from migagent.layout.desired import DesiredNode
from migagent.planning import Plan
from migagent.reconcile.states import Phase

JOURNAL_VERSION = 1
JOURNAL_FILE = "journal.json"
PROGRESS_FILE = "journal.log"
_PROGRESS_KEY = "progress"
SLOT_BYTES = 64
"""One progress line's slot in journal.log: the JSON, spaces, a newline."""

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class JournalRecord:
    """One apply attempt's progress. The boot id is per boot. When a failed node is retried is not
    the journal's: the agent keeps it on the Node (attempt.backoff), host mode in memory."""

    version: int
    boot_id: str
    layout_hash: str
    config_name: str
    phase: Phase
    plan: Plan | None = None
    step_index: int = 0
    attempts: int = 0
    last_error: str | None = None
    reboot_requested: bool = False

    def evolve(self, **changes: Any) -> JournalRecord:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "boot_id": self.boot_id,
            "layout_hash": self.layout_hash,
            "config_name": self.config_name,
            "phase": self.phase.value,
            "plan": None if self.plan is None else self.plan.to_json(),
            "step_index": self.step_index,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "reboot_requested": self.reboot_requested,
        }

    @classmethod
    def from_json(cls, data: Any) -> JournalRecord:
        """Raises ValueError (or KeyError/TypeError) for anything that is not a journal record."""
        if not isinstance(data, dict):
            raise ValueError(f"a journal record is a JSON object, got {type(data).__name__}")
        if data.get("version") != JOURNAL_VERSION:
            raise ValueError(f"journal version {data.get('version')!r}, expected {JOURNAL_VERSION}")
        plan = data.get("plan")
        return cls(
            version=JOURNAL_VERSION,
            boot_id=str(data["boot_id"]),
            layout_hash=str(data["layout_hash"]),
            config_name=str(data["config_name"]),
            phase=Phase(data["phase"]),
            plan=None if plan is None else Plan.from_json(plan),
            step_index=int(data["step_index"]),
            attempts=int(data["attempts"]),
            last_error=data.get("last_error"),
            reboot_requested=bool(data["reboot_requested"]),
        )


class Journal(Protocol):
    def load(self) -> JournalRecord | None: ...

    def save(self, record: JournalRecord) -> None: ...

    def clear(self) -> None: ...

    def check_writable(self, plan: Plan | None) -> None:
        """Raise StorageError unless a record holding `plan`, and its progress, can be written now."""
        ...


class MemoryJournal:
    """A journal that lives as long as the object: for tests and for throw-away simulated nodes."""

    def __init__(self, record: JournalRecord | None = None) -> None:
        self.record = record
        self.saves: list[JournalRecord] = []

    def load(self) -> JournalRecord | None:
        return self.record

    def save(self, record: JournalRecord) -> None:
        self.record = record
        self.saves.append(record)

    def clear(self) -> None:
        self.record = None

    def check_writable(self, plan: Plan | None) -> None:
        return None


class FileJournal:
    """`directory/journal.json` (the record, plan included) plus `directory/journal.log` (its progress)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / JOURNAL_FILE
        self.progress_path = directory / PROGRESS_FILE
        self._base: JournalRecord | None = None
        """The record journal.json holds as written by this object; None: write it afresh next save."""
        self._token = ""
        self._slots = 0
        self._next_slot = 0

    def load(self) -> JournalRecord | None:
        self._base = None  # another process may have written since: the next save writes the record afresh
        sweep_stale_temp_files(self.path)
        try:
            refuse_directory(self.path)
            text = read_bounded(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise storage_error("the journal", self.path, exc) from exc
        try:
            data = decode_json(text)
            record = JournalRecord.from_json(data)
        except Exception as exc:
            # Safe to drop: the engine re-observes and re-plans without it.
            log.warning("journal_unreadable", path=str(self.path), error=f"{type(exc).__name__}: {exc}")
            return None
        token = data.get(_PROGRESS_KEY)
        if isinstance(token, str) and token:
            step_index = self._logged_step_index(token)
            if step_index is not None:
                record = record.evolve(step_index=step_index)
        return record

    def _logged_step_index(self, token: str) -> int | None:
        """The last step index the log holds for `token`; None when it holds none."""
        try:
            lines = read_bounded(self.progress_path).splitlines()
        except OSError:
            return None  # no log (or an unreadable one): the record's own index stands
        found: int | None = None
        for line in lines:
            if not line.strip():
                continue  # a slot not written yet
            try:
                entry = decode_json(line)
            except ValueError:
                continue  # a line a crash tore: the one before it stands
            if isinstance(entry, dict) and entry.get(_PROGRESS_KEY) == token:
                index = entry.get("step_index")
                if isinstance(index, int) and not isinstance(index, bool) and index >= 0:
                    found = index
        return found

    def save(self, record: JournalRecord) -> None:
        base = self._base
        if base is not None and self._only_progress(base, record):
            self._write_progress(record.step_index)
            return
        self._write_record(record)

    def _write_progress(self, step_index: int) -> None:
        line = json.dumps({_PROGRESS_KEY: self._token, "step_index": step_index}, separators=(",", ":"))
        if self._next_slot < self._slots and len(line) < SLOT_BYTES:
            payload = (line.ljust(SLOT_BYTES - 1) + "\n").encode("ascii")
            overwrite_durably(self.progress_path, payload, offset=self._next_slot * SLOT_BYTES, what="the journal")
        else:  # more progress than the plan had steps (a retried step): past the slots, appended
            append_durably(self.progress_path, (line + "\n").encode("ascii"), what="the journal")
        self._next_slot += 1

    def _only_progress(self, base: JournalRecord, record: JournalRecord) -> bool:
        if record.plan is not base.plan and record.plan != base.plan:
            return False
        if record.evolve(step_index=base.step_index, plan=base.plan) != base:
            return False
        self._base = replace(base, plan=record.plan)  # the caller's plan object: later checks are by identity
        return True

    def _write_record(self, record: JournalRecord) -> None:
        self._base = None
        token = _new_token()
        data = record.to_json() | {_PROGRESS_KEY: token}
        payload = json.dumps(data, separators=(",", ":"), sort_keys=True).encode("utf-8")
        write_atomically(self.path, payload, what="the journal", sync_directory=False)
        # Blanked after the record is replaced: a crash in between leaves lines of the old token, ignored.
        slots = _progress_slots(record.plan)
        preallocate_durably(self.progress_path, slots * SLOT_BYTES, what="the journal")
        try:
            fsync_directory(self.directory)
        except OSError as exc:
            raise storage_error("the journal", self.directory, exc) from exc
        self._base, self._token, self._slots, self._next_slot = record, token, slots, 0

    def clear(self) -> None:
        self._base = None
        try:
            self.path.unlink(missing_ok=True)
            self.progress_path.unlink(missing_ok=True)
            if self.directory.exists():
                fsync_directory(self.directory)
        except OSError as exc:
            raise storage_error("the journal", self.path, exc) from exc

    def check_writable(self, plan: Plan | None) -> None:
        """Write and sync as many bytes as the journal of an attempt at `plan` holds at its peak (its
        record, the final record written beside it, a progress line per step), in the journal's
        directory, and remove them: a full, read-only or unwritable directory, a size limit, or a
        journal path that is a directory shows here, before anything is changed, and not after the
        last step, when only the final record is missing."""
        sweep_stale_temp_files(self.path)
        try:
            refuse_directory(self.path)
            refuse_directory(self.progress_path)
        except OSError as exc:
            raise storage_error("the journal", self.path, exc) from exc
        record_bytes = 512 + (0 if plan is None else len(json.dumps(plan.to_json(), separators=(",", ":"))))
        # The most the journal holds at once: a record, the next one being written beside it, and the log.
        peak = (record_bytes, record_bytes, SLOT_BYTES * _progress_slots(plan))
        probe_room(self.directory, peak, what="the journal directory")


def _progress_slots(plan: Plan | None) -> int:
    """Progress lines one record can take: one per step, and the end of the last."""
    return 2 + (0 if plan is None else len(plan.steps))


def _new_token() -> str:
    return os.urandom(8).hex()


def desired_node_hash(desired: DesiredNode) -> str:
    """A stable digest of what is asked for: the journal's key for "the same layout"."""
    canonical = [
        [gpu.index, gpu.mig_enabled, sorted([gi.profile_id, list(gi.ci_profile_ids)] for gi in gpu.gpu_instances)]
        for gpu in sorted(desired.gpus, key=lambda g: g.index)
    ]
    return hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode("ascii")).hexdigest()
