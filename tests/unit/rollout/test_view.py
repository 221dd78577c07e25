"""What a person reads while a rollout runs: the table rows, the headline, the end report."""

from __future__ import annotations

import io
from dataclasses import replace

from migagent.cli.rollout_view import LiveTable, ending_lines, evictions_report, headline, node_rows
from migagent.clock import FakeClock
from migagent.rollout.budget import MaxUnavailable
from migagent.rollout.port import LiveNode
from migagent.rollout.spec import RolloutSpec
from migagent.rollout.state import Layouts, NodeRecord, NodeStatus, Phase, RolloutState

LAYOUTS = """\
version: v1
mig-configs:
  new:
    - devices: all
      mig-enabled: false
"""


def state() -> RolloutState:
    records = [
        NodeRecord("a", NodeStatus.DONE, "new", "old", gpus=8, wave=1, predicted=("ml/x",), evicted=("ml/x",),
                   started_at=100.0, finished_at=130.0),
        NodeRecord("b", NodeStatus.IN_FLIGHT, "new", "old", gpus=8, wave=2, predicted=("ml/y", "ml/z"),
                   started_at=140.0),
        NodeRecord("c", NodeStatus.FAILED, "new", "old", gpus=4, wave=2, predicted=("ml/w",), evicted=(),
                   reason="ApplyFailed: boom", started_at=140.0, finished_at=150.0),
        NodeRecord("d", NodeStatus.PENDING, "new", "old", gpus=8),
    ]
    spec = RolloutSpec(selector="pool=a", layout="new", max_unavailable=MaxUnavailable(16))
    return RolloutState(name="r", spec=spec, layouts=Layouts.parse(LAYOUTS, source="test"), phase=Phase.RUNNING,
                        nodes={r.node: r for r in records}, waves=2)


def test_rows_show_wave_state_gpus_evictions_done_of_predicted_seconds_and_what_the_agent_does() -> None:
    live = {"b": LiveNode(agent="Draining", evicted=("ml/y",), seconds=12.4)}
    assert node_rows(state(), live, now=160.0) == [
        ("1", "a", "done", "8", "1/1", "30", "-"),
        ("2", "b", "in-flight", "8", "1/2", "12", "Draining"),
        ("2", "c", "failed", "4", "0/1", "10", "ApplyFailed: boom"),
        ("-", "d", "pending", "8", "-", "-", "-"),
    ]


def test_the_headline_counts_nodes_by_status_against_the_budgets() -> None:
    assert headline(state()) == (
        "rollout r (rollout): running; -l pool=a -c new; wave 2; 1/4 done, 1 in flight, 1 failed (budget 1),"
        " 0 skipped, 0 changed by someone else; --max-unavailable 16"
    )


def test_the_end_report_marks_a_node_whose_evictions_differ_from_the_prediction() -> None:
    lines = evictions_report(state())
    assert lines[0].split() == ["NODE", "WAVE", "STATE", "PREDICTED", "ACTUAL", "MATCH"]
    assert lines[1].split() == ["a", "1", "done", "ml/x", "ml/x", "yes"]
    assert lines[3].split() == ["c", "2", "failed", "ml/w", "-", "NO"]
    assert len(lines) == 4  # the pending node went in no wave


def test_the_live_table_is_redrawn_in_place_under_each_event_line() -> None:
    out = io.StringIO()
    table = LiveTable(FakeClock(start_wall=160.0), out)
    table.progress(state(), {})
    table.event("node_done", node="a", evicted=["ml/x"], predicted=["ml/x"])
    text = out.getvalue()
    assert "\x1b[6F\x1b[J" in text  # the 6 lines drawn (headline, header, 4 rows) erased before the event
    assert "a done: evicted 1 (predicted 1)" in text
    assert text.rstrip().splitlines()[-1].split()[:3] == ["-", "d", "pending"]  # then the table again


def test_the_end_report_names_each_skipped_node_with_its_reason() -> None:
    # A node a rollout cannot change was said only in -o json: the table ended "done" with nothing about it.
    skipped = NodeRecord("e", NodeStatus.SKIPPED, "new", "old", gpus=8, reason="GPU 0: the layout does not fit")
    done = replace(state(), phase=Phase.DONE, nodes={**state().nodes, "e": skipped})
    lines = ending_lines(done)
    assert lines[lines.index("1 node(s) skipped, not changed:") + 1] == "  e: GPU 0: the layout does not fit"


def test_an_event_without_words_of_its_own_shows_its_lists_as_items_not_python_reprs() -> None:
    out = io.StringIO()
    LiveTable(FakeClock(), out, redraw=False).event("done", rollout="r", mode="rollout", failed=[], nodes=("a", "b"))
    assert out.getvalue() == "done: mode=rollout, failed=none, nodes=a, b\n"
