"""The file journal's cost and its reading of what is on disk: the record (plan included) is written
once, each step after is one short line; anything that is not a record is dropped; disk errors are
StorageErrors naming the path and the errno."""

import errno
import json
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from migagent.errors import StorageError
from migagent.reconcile.journal import SLOT_BYTES, FileJournal, JournalRecord
from migagent.reconcile.states import Phase
from tests.storage_faults import full_directory, unwritable_directory
from tests.unit.reconcile.test_journal import _PLAN, _record


def _progress_lines(tmp_path: Path) -> list[bytes]:
    return [line for line in (tmp_path / "journal.log").read_bytes().splitlines() if line.strip()]


def test_steps_after_the_first_record_write_one_line_each_and_leave_the_record_alone(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path)
    journal.save(_record(step_index=0))
    written = (tmp_path / "journal.json").read_bytes()
    slots = (tmp_path / "journal.log").stat().st_size
    assert slots == SLOT_BYTES * (len(_PLAN.steps) + 2)  # one blank slot per step (and one more), written up front
    for index in range(1, 4):
        journal.save(_record(step_index=index))
    assert (tmp_path / "journal.json").read_bytes() == written
    assert len(_progress_lines(tmp_path)) == 3
    assert (tmp_path / "journal.log").stat().st_size == slots  # overwritten in place, not appended
    assert FileJournal(tmp_path).load() == _record(step_index=3)


def test_progress_past_the_slots_is_appended(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path)
    journal.save(_record(step_index=0))
    for index in range(1, 12):
        journal.save(_record(step_index=index))
    assert len(_progress_lines(tmp_path)) == 11
    assert FileJournal(tmp_path).load() == _record(step_index=11)


def test_a_record_that_changes_more_than_the_step_index_is_written_whole_and_the_log_emptied(
    tmp_path: Path,
) -> None:
    journal = FileJournal(tmp_path)
    journal.save(_record(step_index=0))
    journal.save(_record(step_index=1))
    journal.save(_record(step_index=2, phase=Phase.FAILED, last_error="boom"))
    assert _progress_lines(tmp_path) == []
    assert FileJournal(tmp_path).load() == _record(step_index=2, phase=Phase.FAILED, last_error="boom")


def test_a_line_torn_by_a_crash_leaves_the_step_before_it(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path)
    journal.save(_record(step_index=0))
    journal.save(_record(step_index=1))
    with open(tmp_path / "journal.log", "r+b") as log:
        log.seek(SLOT_BYTES)  # the slot after step 1's line, torn mid-write
        log.write(b'{"progress":"')
    assert FileJournal(tmp_path).load() == _record(step_index=1)


def test_log_lines_of_an_older_record_are_ignored(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path)
    journal.save(_record(step_index=0))
    journal.save(_record(step_index=2))
    stale = (tmp_path / "journal.log").read_bytes()
    journal.save(_record(step_index=0, config_name="other"))
    (tmp_path / "journal.log").write_bytes(stale)  # as if a crash came between the record and the emptying
    assert FileJournal(tmp_path).load() == _record(step_index=0, config_name="other")


def test_a_loaded_journal_writes_the_record_afresh_before_appending(tmp_path: Path) -> None:
    FileJournal(tmp_path).save(_record(step_index=0))
    again = FileJournal(tmp_path)
    record = again.load()
    assert record is not None
    again.save(record.evolve(step_index=1))
    assert _progress_lines(tmp_path) == []
    assert FileJournal(tmp_path).load() == _record(step_index=1)


@pytest.mark.parametrize("content", ["null", "[]", "5", '"text"', "true", "{}", '{"version": 1}', "\x00\xff garbage"])
def test_content_that_is_not_a_journal_record_is_dropped_with_a_warning(tmp_path: Path, content: str) -> None:
    (tmp_path / "journal.json").write_bytes(content.encode("latin-1"))
    with capture_logs() as logs:
        assert FileJournal(tmp_path).load() is None
    assert [entry["event"] for entry in logs] == ["journal_unreadable"]


def test_a_record_with_a_malformed_plan_is_dropped(tmp_path: Path) -> None:
    data = _record().to_json() | {"plan": {"gpus": 5, "steps": "x"}}
    (tmp_path / "journal.json").write_text(json.dumps(data), encoding="utf-8")
    with capture_logs():
        assert FileJournal(tmp_path).load() is None


def test_a_journal_path_that_is_a_directory_is_a_storage_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "journal.json").mkdir()
    with pytest.raises(StorageError) as raised:
        FileJournal(tmp_path).load()
    assert raised.value.errno == errno.EISDIR
    assert str(tmp_path / "journal.json") in str(raised.value)
    assert "EISDIR" in str(raised.value)
    with pytest.raises(StorageError, match="EISDIR"):
        FileJournal(tmp_path).check_writable(_PLAN)


def test_an_unwritable_directory_fails_the_check_and_the_save_naming_path_and_errno(tmp_path: Path) -> None:
    directory = tmp_path / "journal"
    with unwritable_directory(directory) as code:
        with pytest.raises(StorageError) as checked:
            FileJournal(directory).check_writable(_PLAN)
        with pytest.raises(StorageError) as saved:
            FileJournal(directory).save(_record())
        for raised in (checked, saved):
            assert raised.value.errno == code
            assert str(directory) in str(raised.value)
            assert errno.errorcode[code] in str(raised.value)
        assert list(directory.iterdir()) == []


def test_a_full_directory_fails_the_check_with_enospc_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    directory = tmp_path / "journal"
    with full_directory(directory) as full:
        if not full:  # no tmpfs to fill without root: a size limit makes the same point (EFBIG)
            return
        with pytest.raises(StorageError, match="ENOSPC"):
            FileJournal(directory).check_writable(_PLAN)
        with pytest.raises(StorageError, match="ENOSPC"):
            FileJournal(directory).save(_record().evolve(last_error="x" * 200_000))
        assert sorted(p.name for p in directory.iterdir()) == ["filler"]


def test_room_for_a_record_and_its_log_but_not_the_final_record_beside_them_fails_the_check(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "journal"
    with full_directory(directory, room=2 * 4096) as full:
        if not full:
            pytest.skip("mounting a tmpfs is not allowed here: tests/storage_faults.full_directory")
        journal = FileJournal(directory)
        # The first record and its progress log would fit (a page each); the final record, written
        # beside the first before it replaces it, would not: refused before anything is changed.
        with pytest.raises(StorageError, match="ENOSPC"):
            journal.check_writable(_PLAN)
        journal.save(_record())
        with pytest.raises(StorageError, match="ENOSPC"):
            journal.save(_record().evolve(phase=Phase.CONVERGED))


def test_the_writability_check_leaves_nothing_behind(tmp_path: Path) -> None:
    FileJournal(tmp_path / "j").check_writable(_PLAN)
    assert list((tmp_path / "j").iterdir()) == []


def test_a_temporary_file_of_a_dead_writer_is_swept_at_load(tmp_path: Path) -> None:
    FileJournal(tmp_path).save(_record())
    orphan = tmp_path / ".journal.json.999999999.abcd.tmp"
    orphan.write_text("half", encoding="utf-8")
    assert FileJournal(tmp_path).load() == _record()
    assert not orphan.exists()


def test_a_record_round_trips_through_the_compact_file(tmp_path: Path) -> None:
    record = JournalRecord.from_json(json.loads(json.dumps(_record(last_error="é\nx").to_json())))
    FileJournal(tmp_path).save(record)
    assert FileJournal(tmp_path).load() == record
