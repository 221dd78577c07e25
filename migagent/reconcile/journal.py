"""The write-ahead journal: what an apply was doing, so that a restarted engine can carry on safely.

The engine writes "about to run step i" before it touches the GPU and "step i done" after verifying
it. A record is small JSON in one file, replaced atomically (tmp + fsync + rename + fsync of the
directory), so a crash leaves either the old record or the new one, never a torn one.

The journal is an optimisation and a memory of failures, not the source of truth: every step is
checked against a fresh observation before it runs, so a record that cannot be read is dropped
(with a warning) and the engine simply observes and plans again.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import structlog

from migagent.layout.desired import DesiredNode
from migagent.planning import Plan
from migagent.reconcile.states import Phase

JOURNAL_VERSION = 1
JOURNAL_FILE = "journal.json"

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class JournalRecord:
    """One apply attempt's progress. `next_retry_at` and the boot id are wall-clock / per-boot values."""

    version: int
    boot_id: str
    layout_hash: str
    config_name: str
    phase: Phase
    plan: Plan | None = None
    step_index: int = 0
    attempts: int = 0
    next_retry_at: float | None = None
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
            "next_retry_at": self.next_retry_at,
            "last_error": self.last_error,
            "reboot_requested": self.reboot_requested,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JournalRecord:
        if data.get("version") != JOURNAL_VERSION:
            raise ValueError(f"journal version {data.get('version')!r}, expected {JOURNAL_VERSION}")
        plan = data.get("plan")
        retry_at = data.get("next_retry_at")
        return cls(
            version=JOURNAL_VERSION,
            boot_id=str(data["boot_id"]),
            layout_hash=str(data["layout_hash"]),
            config_name=str(data["config_name"]),
            phase=Phase(data["phase"]),
            plan=None if plan is None else Plan.from_json(plan),
            step_index=int(data["step_index"]),
            attempts=int(data["attempts"]),
            next_retry_at=None if retry_at is None else float(retry_at),
            last_error=data.get("last_error"),
            reboot_requested=bool(data["reboot_requested"]),
        )


class Journal(Protocol):
    def load(self) -> JournalRecord | None: ...

    def save(self, record: JournalRecord) -> None: ...

    def clear(self) -> None: ...


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


class FileJournal:
    """One JSON record in `directory/journal.json`, replaced atomically on every save."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / JOURNAL_FILE

    def load(self) -> JournalRecord | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            return JournalRecord.from_json(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            # Safe to drop: the engine re-observes and re-plans without it.
            log.warning("journal_unreadable", path=str(self.path), error=str(exc))
            return None

    def save(self, record: JournalRecord) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        # A name of its own per write: two writers (which the state lock should prevent) never share a tmp file.
        tmp = self.path.with_name(f".{JOURNAL_FILE}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        payload = json.dumps(record.to_json(), indent=2, sort_keys=True).encode("utf-8")
        with open(tmp, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_directory(self.directory)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
        _fsync_directory(self.directory)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable: without this a power cut can bring the old file back."""
    if not directory.exists():
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def desired_node_hash(desired: DesiredNode) -> str:
    """A stable digest of what is asked for: the journal's key for "the same layout"."""
    canonical = [
        [gpu.index, gpu.mig_enabled, sorted([gi.profile_id, list(gi.ci_profile_ids)] for gi in gpu.gpu_instances)]
        for gpu in sorted(desired.gpus, key=lambda g: g.index)
    ]
    return hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode("ascii")).hexdigest()
