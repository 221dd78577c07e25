import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from migagent.catalog.model import Placement
from migagent.layout.desired import DesiredGi, DesiredGpu, DesiredNode
from migagent.planning import GpuPlan, Plan, Step, StepKind
from migagent.reconcile.bootid import FixedBootId, read_boot_id
from migagent.reconcile.journal import (
    JOURNAL_VERSION,
    FileJournal,
    JournalRecord,
    MemoryJournal,
    desired_node_hash,
)
from migagent.reconcile.states import Phase

_PLAN = Plan(
    gpus=(
        GpuPlan(
            gpu=0,
            keep=(),
            destroy=(),
            create=((DesiredGi(19, (0,)), Placement(0, 1)),),
            mode_change=True,
            reset=False,
        ),
    ),
    steps=(
        Step(StepKind.SET_MODE, 0, mig_enabled=True),
        Step(StepKind.CREATE_GI, 0, gi_profile_id=19, gi_placement=Placement(0, 1)),
        Step(
            StepKind.CREATE_CI,
            0,
            gi_profile_id=19,
            gi_placement=Placement(0, 1),
            ci_profile_id=0,
            ci_placement=Placement(0, 1),
        ),
    ),
)


def _record(**changes: object) -> JournalRecord:
    base = JournalRecord(
        version=JOURNAL_VERSION,
        boot_id="boot-1",
        layout_hash="abc",
        config_name="all-1g.10gb",
        phase=Phase.APPLYING,
        plan=_PLAN,
        step_index=1,
    )
    return base.evolve(**changes)


@given(
    phase=st.sampled_from(list(Phase)),
    step_index=st.integers(0, 100),
    attempts=st.integers(0, 50),
    error=st.none() | st.text(max_size=40),
    reboot=st.booleans(),
    with_plan=st.booleans(),
)
def test_a_record_survives_the_json_round_trip(  # noqa: PLR0917 - one argument per hypothesis strategy
    phase: Phase,
    step_index: int,
    attempts: int,
    error: str | None,
    reboot: bool,
    with_plan: bool,
) -> None:
    record = _record(
        phase=phase,
        step_index=step_index,
        attempts=attempts,
        last_error=error,
        reboot_requested=reboot,
        plan=_PLAN if with_plan else None,
    )
    assert JournalRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


def test_a_missing_journal_loads_as_none(tmp_path: Path) -> None:
    assert FileJournal(tmp_path / "journal").load() is None


def test_a_saved_record_loads_back_from_a_new_journal_object(tmp_path: Path) -> None:
    FileJournal(tmp_path / "j").save(_record())
    assert FileJournal(tmp_path / "j").load() == _record()


def test_saving_replaces_the_record_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path)
    journal.save(_record(step_index=1))
    journal.save(_record(step_index=2))
    assert journal.load() == _record(step_index=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal.json", "journal.log"]


def test_clear_removes_the_record(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path)
    journal.save(_record())
    journal.clear()
    assert journal.load() is None


def test_a_corrupt_journal_is_dropped_with_a_warning_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "journal.json").write_text("{ not json", encoding="utf-8")
    with capture_logs() as logs:
        assert FileJournal(tmp_path).load() is None
    assert logs[0]["event"] == "journal_unreadable"
    assert logs[0]["path"].endswith("journal.json")


def test_a_journal_from_another_version_is_dropped(tmp_path: Path) -> None:
    data = _record().to_json() | {"version": JOURNAL_VERSION + 1}
    (tmp_path / "journal.json").write_text(json.dumps(data), encoding="utf-8")
    with capture_logs():
        assert FileJournal(tmp_path).load() is None


def test_memory_journal_keeps_every_save_in_order() -> None:
    journal = MemoryJournal()
    journal.save(_record(step_index=1))
    journal.save(_record(step_index=2))
    assert [r.step_index for r in journal.saves] == [1, 2]
    assert journal.load() == _record(step_index=2)


def test_the_layout_hash_ignores_gpu_order_and_config_name_but_not_content() -> None:
    a = DesiredGpu(0, True, (DesiredGi(19, (0,)), DesiredGi(9, (2,))), config_name="x")
    b = DesiredGpu(1, False, config_name="x")
    same = DesiredNode((b, DesiredGpu(0, True, (DesiredGi(9, (2,)), DesiredGi(19, (0,))), config_name="y")))
    assert desired_node_hash(DesiredNode((a, b))) == desired_node_hash(same)
    assert desired_node_hash(DesiredNode((a,))) != desired_node_hash(DesiredNode((a, b)))


def test_the_boot_id_is_read_from_the_given_file(tmp_path: Path) -> None:
    path = tmp_path / "boot_id"
    path.write_text("1234-abcd\n", encoding="ascii")
    assert read_boot_id(path) == "1234-abcd"


def test_a_fixed_boot_id_changes_on_reboot() -> None:
    boot = FixedBootId()
    first = boot()
    assert boot.reboot() != first
    assert boot() != first


def test_a_record_written_with_the_retired_next_retry_field_still_loads() -> None:
    data = _record().to_json()
    data["next_retry_at"] = 1_800_000_030.0  # written by migagent before the retry time moved to the Node
    assert JournalRecord.from_json(data) == _record()
