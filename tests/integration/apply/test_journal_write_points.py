"""Each write the apply engine makes, refused as a full disk refuses it (ENOSPC).

The journal's disk can fill at any of its writes: the first record, a step's progress line, the
final record once every step is done, the reboot-requested record, the record of a stop before a
skipped reset. At each one the apply fails with one message that names the storage error and where
the GPUs stand (untouched, part way, or already at the layout), never an engine error such as an
illegal phase change; no GPU instance is left without compute instances; and once the disk has
room again, one apply finishes and the journal ends `converged`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from migagent.durable import storage_error
from migagent.errors import MigAgentError
from migagent.reconcile.journal import FileJournal, JournalRecord, desired_node_hash
from migagent.reconcile.machine import ApplyEngine, ApplyOutcome, ApplyResult
from migagent.reconcile.session import ApplySession
from migagent.reconcile.states import Phase
from tests.integration.apply.support import SimNode
from tests.storage_faults import fill_up, full_directory

MakeNode = Callable[[str], SimNode]
START, TARGET = "h100-2x3g", "h100-3g-2g-1g"
"""Destroys one 3g GI and creates a 2g and a 1g: destroy CI, destroy GI, 2x create GI, 2x create CI."""


class DiskFillsUp(FileJournal):
    """A FileJournal whose disk is full from its `full_at`th save on (1 = the first): that save and every
    later one fail as `write_atomically` and the progress writes fail on a full disk."""

    def __init__(self, directory: Path, *, full_at: int) -> None:
        super().__init__(directory)
        self.full_at = full_at
        self.saves = 0

    def save(self, record: JournalRecord) -> None:
        self.saves += 1
        if self.saves >= self.full_at:
            raise storage_error("the journal", self.path, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        super().save(record)


def _apply(node: SimNode, config: str, journal: FileJournal, **options: object) -> ApplyResult:
    desired = node.desired(config)
    engine = ApplyEngine(
        node.driver, journal, clock=node.clock, boot_id_provider=node.boot, reboot_requester=node.reboots,
        **options,  # type: ignore[arg-type]
    )
    with capture_logs():
        return engine.apply(desired, layout_hash=desired_node_hash(desired), config_name=config)


def _bare_instances(node: SimNode) -> list[tuple[int, int]]:
    return [(g.index, gi.id) for g in node.observe().gpus for gi in g.gpu_instances if not gi.compute_instances]


def _started(make_node: MakeNode) -> tuple[SimNode, int]:
    node = make_node("H100-80GB-SXM")
    assert _apply(node, START, node.journal()).converged
    return node, len(node.plan(TARGET).steps)


def _refused_at(node: SimNode, full_at: int) -> str:
    result = _apply(node, TARGET, DiskFillsUp(node.journal_dir, full_at=full_at))
    assert result.outcome is ApplyOutcome.FAILED
    assert result.error is not None
    assert result.error.startswith(f"cannot write the journal {node.journal_dir / 'journal.json'}: No space left")
    assert "(ENOSPC)" in result.error
    assert "illegal phase change" not in result.error
    assert _bare_instances(node) == []
    return result.error


def _room_again_finishes(node: SimNode) -> None:
    result = _apply(node, TARGET, node.journal())
    assert result.converged, result.error
    record = node.journal().load()
    assert record is not None
    assert record.phase is Phase.CONVERGED
    assert node.plan(TARGET).is_empty


def test_the_first_record_refused_says_no_gpu_was_changed(make_node: MakeNode) -> None:
    node, _steps = _started(make_node)
    error = _refused_at(node, 1)
    assert error.endswith("; no GPU was changed by this apply")
    assert node.plan(START).is_empty
    _room_again_finishes(node)


@pytest.mark.parametrize("after_step", [1, 3, 5])
def test_a_progress_line_refused_says_how_far_the_gpus_got_and_leaves_no_bare_gpu_instance(
    make_node: MakeNode, after_step: int
) -> None:
    node, steps = _started(make_node)
    assert steps == 6
    error = _refused_at(node, 1 + after_step)  # save 1 is the record; save 1+k follows step k
    assert f"; the apply stopped after {after_step} of {steps} step(s), GPU 0 part way to config {TARGET}" in error
    assert error.endswith("; once the disk has room, run the same apply again to finish")
    _room_again_finishes(node)


def test_the_final_record_refused_after_every_step_says_the_gpus_match_the_layout(make_node: MakeNode) -> None:
    node, steps = _started(make_node)
    error = _refused_at(node, steps + 2)  # the record, a line per step, then the final record
    assert error.endswith(
        f"; the GPUs match config {TARGET} all the same: nothing is left to do, and the next"
        " apply records it once the disk has room"
    )
    assert node.plan(TARGET).is_empty
    _room_again_finishes(node)


def test_the_reboot_requested_record_refused_requests_no_reboot(make_node: MakeNode) -> None:
    node = make_node("A100-40GB")
    node.fake.sim_set_reset_supported(0, False)
    desired = node.desired("a100-balanced")
    journal = DiskFillsUp(node.journal_dir, full_at=2)  # the record, then the reboot record
    engine = ApplyEngine(node.driver, journal, clock=node.clock, boot_id_provider=node.boot,
                         reboot_requester=node.reboots, allow_reboot=True)
    with capture_logs():
        result = engine.apply(desired, layout_hash=desired_node_hash(desired), config_name="a100-balanced")
    assert result.outcome is ApplyOutcome.FAILED
    assert result.error is not None
    assert "(ENOSPC)" in result.error
    assert "the apply stopped after 0 of " in result.error  # the set-mode step left the mode pending
    assert "GPU 0 part way to config a100-balanced" in result.error
    assert node.reboots.reasons == []  # a reboot whose record is lost would be asked for again after it


def test_the_record_of_a_stop_before_a_skipped_reset_refused_fails_naming_the_disk(make_node: MakeNode) -> None:
    node = make_node("A100-40GB")
    result = _apply(node, "a100-balanced", DiskFillsUp(node.journal_dir, full_at=3), skip_reset=True)
    assert result.outcome is ApplyOutcome.FAILED
    assert result.error is not None
    assert "(ENOSPC)" in result.error
    assert "the apply stopped after 1 of " in result.error
    assert node.observe().gpu(0).mig_pending  # the mode change stays pending, as --skip-reset asked


def test_a_disk_that_fills_during_the_mode_part_says_the_instances_are_not_made(make_node: MakeNode) -> None:
    """Issue 37 item 14: the mode part reached its own target (MIG on, no instances) and its last record
    was refused; the message said the GPUs matched the whole config, with nothing left to do."""
    node = make_node("8xA100-40GB")  # MIG disabled on every GPU
    session = ApplySession(engine=node.engine(), observe=node.observe)
    with full_directory(node.journal_dir, room=48 * 1024) as mounted, capture_logs():
        if not mounted:
            pytest.skip("mounting a tmpfs is not allowed here: tests/storage_faults.full_directory")
        node.fake.sim_after_each_mutation(lambda _call: fill_up(node.journal_dir))
        with pytest.raises(MigAgentError) as refused:
            session.run(node.desired("a100-balanced"), config_name="a100-balanced", mode_only=False)
    error = str(refused.value)
    assert "(ENOSPC)" in error
    assert all(gpu.mig_current and not gpu.gpu_instances for gpu in node.observe().gpus)
    assert "nothing is left to do" not in error
    assert error.endswith("GPUs 0-7 part way to config a100-balanced; once the disk has room, run the same apply"
                          " again to finish")
