"""How the head-to-head reads a run: success entries that ignore the state left over from the previous
layout, GPU changes by MIG device UUID, and the facts a repeated run must reproduce."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from bench.head_to_head.gpus import GpuSnapshot, MigDevice, compare, describe_node, gpu_ranges
from bench.head_to_head.publish import replace_block, summary
from bench.head_to_head.recorder import Recorder
from bench.head_to_head.report import cell, facts, summarise
from bench.head_to_head.run import RunRecord
from bench.head_to_head.timeline import (
    NodeSample,
    advertised_entries,
    cordon_episodes,
    events,
    pause_episodes,
    sample,
    success_entries,
)

PAUSED = (("device-plugin", "paused-for-mig-change"), ("dcgm", "paused-for-mig-change"))
TRUE = (("device-plugin", "true"), ("dcgm", "true"))


def _s(t: float, state: str, layout: str, *, cordoned: bool = False, deploy: tuple[tuple[str, str], ...] = TRUE,
       advertised: dict[str, int] | None = None) -> NodeSample:  # fmt: skip
    return NodeSample(t, state, layout, cordoned, deploy, advertised or {})


def test_a_node_read_from_its_json_keeps_the_labels_the_cordon_and_the_non_zero_mig_resources() -> None:
    node = {
        "metadata": {
            "labels": {
                "nvidia.com/mig.config": "a",
                "nvidia.com/mig.config.state": "pending",
                "nvidia.com/gpu.deploy.dcgm": "paused-for-mig-change",
                "other": "x",
            }
        },
        "spec": {"unschedulable": True},
        "status": {"allocatable": {"nvidia.com/mig-1g.10gb": "3", "nvidia.com/mig-7g.80gb": "0", "cpu": "4"}},
    }
    got = sample(node, 1.5)
    assert (got.state, got.layout, got.cordoned) == ("pending", "a", True)
    assert got.deploy == (("dcgm", "paused-for-mig-change"),)
    assert dict(got.advertised) == {"nvidia.com/mig-1g.10gb": 3}


def test_the_success_left_from_the_previous_layout_is_not_the_new_layouts_success() -> None:
    samples = [
        _s(-5.0, "success", "old"),
        _s(0.1, "success", "new"),  # the label write: the state label still speaks of the old layout
        _s(1.0, "pending", "new"),
        _s(4.0, "success", "new"),
    ]
    assert success_entries(samples, "new", after=0.0) == [4.0]
    assert success_entries(samples[:2], "new", after=0.0) == []


def test_a_layout_label_written_over_a_success_is_no_entry_until_the_state_label_moves() -> None:
    """The admin drained first (the clock started) and then wrote the label over the old `success`."""
    samples = [_s(0.0, "success", "old"), _s(1.0, "success", "new"), _s(2.0, "pending", "new"),
               _s(3.0, "success", "new")]  # fmt: skip
    assert success_entries(samples, "new", after=0.0) == [3.0]


def test_a_success_reported_before_the_last_label_was_applied_counts_as_a_separate_entry() -> None:
    """mig-manager finishing an older label while the newest already names another layout."""
    samples = [_s(0.0, "success", "c"), _s(1.0, "pending", "c"), _s(5.0, "success", "c"), _s(6.0, "pending", "c"),
               _s(9.0, "success", "c")]  # fmt: skip
    assert success_entries(samples, "c", after=0.0) == [5.0, 9.0]


def test_the_advertisement_entry_is_when_allocatable_holds_exactly_the_expected_resources() -> None:
    want = {"nvidia.com/mig-1g.10gb": 2}
    samples = [
        _s(0.0, "success", "n", advertised={"nvidia.com/mig-1g.10gb": 7}),
        _s(1.0, "pending", "n", advertised={}),
        _s(2.0, "pending", "n", advertised={"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1}),
        _s(3.0, "success", "n", advertised=want),
    ]
    assert advertised_entries(samples, want, after=0.0) == [3.0]


def test_cordons_and_pauses_are_counted_as_episodes_and_the_events_name_each_change() -> None:
    samples = [
        _s(0.0, "success", "n"),
        _s(1.0, "pending", "n", cordoned=True, deploy=PAUSED),
        _s(2.0, "pending", "n", cordoned=False, deploy=TRUE),
        _s(3.0, "pending", "n", cordoned=True, deploy=PAUSED),
        _s(4.0, "success", "n", advertised={"nvidia.com/mig-1g.10gb": 2}),
    ]
    assert cordon_episodes(samples) == 2
    assert pause_episodes(samples) == 2
    lines = events(samples)
    assert lines[1] == "  +1.00s state=pending, cordoned, operands paused-for-mig-change: dcgm, device-plugin"
    assert (
        lines[-1] == "  +4.00s state=success, uncordoned, operands true: dcgm, device-plugin, advertised 2 MIG devices"
    )


def _device(gpu: int, start: int, uuid: str, profile: str = "1g.10gb") -> MigDevice:
    return MigDevice(gpu, start, profile, uuid)


def test_a_gpu_is_touched_when_a_mig_device_uuid_on_it_went_or_came() -> None:
    before = GpuSnapshot((_device(0, 0, "a"), _device(0, 1, "b"), _device(1, 0, "c")), (True, True, False))
    after = GpuSnapshot((_device(0, 0, "a"), _device(0, 2, "d", "2g.20gb"), _device(1, 0, "c")), (True, True, True))
    change = compare(before, after)
    assert change.touched == (0, 2)
    assert [d.uuid for d in change.kept] == ["a", "c"]
    assert ([d.uuid for d in change.destroyed], [d.uuid for d in change.created]) == (["b"], ["d"])
    assert describe_node(after) == "GPU 0: 2g.20gb + 1g.10gb; GPU 1: 1g.10gb; GPU 2: none"
    assert gpu_ranges([0, 1, 2, 3, 5, 7]) == "0-3, 5, 7"


def _record(**changes: object) -> RunRecord:
    base = RunRecord(
        scenario="pods", manager="m", success_s=3.0, advertised_s=3.5, failed_s=None, final_state="success",
        evicted=("infer",), deleted=(), kept_running=("train",), operand_restarts=4, gpus_touched=(0, 1),
        kept=(_device(0, 0, "a"),), destroyed=6, created=3, success_entries=1, cordon_episodes=1,
        pause_episodes=1, left_cordoned=False, left_paused=(), gpus_after="GPUs 0-1: ...", advertised_after=9,
        events=(),
    )  # fmt: skip
    return replace(base, **changes)  # type: ignore[arg-type]


def test_runs_that_did_the_same_agree_on_their_facts_whatever_their_times() -> None:
    runs = [_record(success_s=2.0), _record(success_s=4.0), _record(success_s=3.0)]
    (summary,) = summarise(runs)
    assert (summary.runs, summary.successes, summary.p50_s, summary.p95_s) == (3, 3, 3.0, 4.0)
    assert summary.same_facts
    assert facts(runs[0]) == (
        "evicted infer; kept running train; GPUs touched: 0-1; 1 GIs kept, 6 destroyed, 3 created; state success"
    )

    (differing,) = summarise([*runs, _record(evicted=("train", "infer"))])
    assert not differing.same_facts
    assert len(differing.facts) == 2


def test_a_failed_run_says_what_it_left_on_the_node() -> None:
    failed = _record(success_s=None, failed_s=1.5, final_state="failed", evicted=(), left_paused=("nvsm",))
    (summary,) = summarise([failed])
    text = cell(summary, failed)
    assert text.startswith("**failed** after 1.5 s; no pod moved; GPUs 0-1 touched, 1/7 GIs kept")
    assert "left nvsm paused" in text
    assert "GPUs left: GPUs 0-1: ..., 9 MIG devices advertised" in text


def test_the_readme_summary_puts_each_manager_in_a_few_words_and_is_written_between_its_markers() -> None:
    ours = _record(manager="migagent")
    theirs = _record(manager="mig-manager", success_s=None, final_state="failed", evicted=(), gpus_touched=(0,),
                     gpus_after="GPU 0: 1g.10gb")  # fmt: skip
    table = summary([ours, theirs], ["migagent", "mig-manager"])
    row = next(line for line in table.splitlines() if line.startswith("| 3 GPU pods"))
    assert "`success` in 3 s, 1 pod(s) moved, 1/7 GPU instances kept" in row
    assert "`failed`, 0 pod(s) moved, left GPU 0: 1g.10gb" in row

    text = "before\n<!-- bench:x begin: old -->\nold table\n<!-- bench:x end -->\nafter\n"
    assert replace_block(text, "x", "new table").splitlines()[2] == "new table"
    with pytest.raises(RuntimeError, match="no <!-- bench:y begin"):
        replace_block(text, "y", "new table")


def _node(*, cordoned: bool) -> dict[str, object]:
    labels = {"nvidia.com/mig.config": "a", "nvidia.com/mig.config.state": "failed"}
    return {"metadata": {"name": "n", "labels": labels}, "spec": {"unschedulable": cordoned}, "status": {}}


def test_the_record_waits_until_the_watch_has_delivered_the_node_as_a_read_shows_it_now() -> None:
    """An admin who gave up uncordoned through the API server: the harness's watch can lag that write, so
    the record would say cordoned where a read says not (CI's failure in the pdb-for-ever scenario)."""
    recorder = Recorder("n")
    recorder.node_changed(_node(cordoned=True))
    uncordoned = _node(cordoned=False)
    delivery = threading.Timer(0.2, recorder.node_changed, args=(uncordoned,))
    delivery.start()
    try:
        assert recorder.catch_up(uncordoned, timeout_s=10.0)
    finally:
        delivery.join()
    latest = recorder.latest()
    assert latest is not None
    assert not latest.cordoned


def test_a_watch_that_never_delivers_the_read_gives_up_at_the_timeout() -> None:
    recorder = Recorder("n")
    recorder.node_changed(_node(cordoned=True))
    assert not recorder.catch_up(_node(cordoned=False), timeout_s=0.1)
    assert recorder.catch_up(_node(cordoned=True), timeout_s=0.1)


def test_a_wait_that_runs_past_its_idle_machine_timeout_goes_on_while_the_load_factor_stretches_it() -> None:
    """At load 28 on 2 cores NVIDIA's mig-manager took 150 s of a 180 s settle, and its device plugin did
    not advertise in time (suite-beside, round 2): the harness's bound is of an idle machine, times the load."""
    looks: list[int] = []

    def done_on_the_third_look(samples: object) -> bool:
        looks.append(1)  # each wait between looks is at least 10 ms: the bound below has passed by the second
        return len(looks) >= 3

    loaded = Recorder("n", load=lambda: 1e6)
    loaded.node_changed(_node(cordoned=False))
    assert loaded.wait_quiet(0.0, timeout_s=0.001, done=done_on_the_third_look)
    looks.clear()
    idle = Recorder("n", load=lambda: 1.0)
    idle.node_changed(_node(cordoned=False))
    assert not idle.wait_quiet(0.0, timeout_s=0.001, done=done_on_the_third_look)
