"""A node's change predicted from its agent's report: the planner's GIs, and the pods on destroyed GIs."""

from __future__ import annotations

import json

import pytest

from migagent.rollout.impact import predict, with_pods_now
from migagent.rollout.reported import UnreadableReportError, read_report
from tests.unit.rollout.support import LAYOUTS, report


def test_the_report_round_trips_gpus_gis_and_pods_per_gi() -> None:
    reported = read_report(report("all-1g.10gb", {(0, 4): ["ml/a"], (1, 0): ["ml/b", "ml/c"]}))
    assert [len(gpu.gpu_instances) for gpu in reported.observation.gpus] == [7, 7]
    assert reported.workloads() == {(0, reported.observation.gpus[0].gpu_instances[4].placement): 1,
                                    (1, reported.observation.gpus[1].gpu_instances[0].placement): 2}
    assert reported.pods_on_gpu(1) == ("ml/b", "ml/c")


def test_pods_on_destroyed_gis_are_evicted_and_pods_on_kept_gis_are_not() -> None:
    impact = predict("n", read_report(report("all-1g.10gb", {(0, 4): ["ml/moved"], (1, 0): ["ml/kept"]})),
                     LAYOUTS, "all-balanced")
    assert impact.evicts == ("ml/moved",)
    assert impact.gpus_changed == (0, 1)
    assert (impact.gis_kept, impact.gis_destroyed, impact.gis_created) == (4, 10, 4)
    assert impact.capacity_before == {"nvidia.com/mig-1g.10gb": 14}
    assert impact.capacity_after == {
        "nvidia.com/mig-1g.10gb": 4, "nvidia.com/mig-2g.20gb": 2, "nvidia.com/mig-3g.40gb": 2
    }


def test_the_planner_keeps_the_gis_that_hold_pods_when_a_packing_allows_it() -> None:
    """all-balanced keeps two 1g.10gb GIs; with pods on slots 2 and 3 it keeps those, evicting nobody."""
    impact = predict("n", read_report(report("all-1g.10gb", {(0, 2): ["ml/a"], (0, 3): ["ml/b"]})),
                     LAYOUTS, "all-balanced")
    assert impact.evicts == ()


def test_a_mode_change_evicts_every_pod_on_the_gpu() -> None:
    impact = predict("n", read_report(report("all-1g.10gb", {(0, 0): ["ml/a"], (0, 6): ["ml/b"]})),
                     LAYOUTS, "all-disabled")
    assert impact.evicts == ("ml/a", "ml/b")
    assert impact.capacity_after == {"nvidia.com/gpu": 2}


def test_a_layout_already_held_changes_nothing() -> None:
    impact = predict("n", read_report(report("all-balanced", {(0, 0): ["ml/a"]})), LAYOUTS, "all-balanced")
    assert (impact.changes, impact.evicts, impact.gis_destroyed) == (False, (), 0)


def test_a_layout_that_does_not_fit_is_the_nodes_problem_not_an_error() -> None:
    impact = predict("n", read_report(report("all-1g.10gb")), LAYOUTS, "too-many-3g")
    assert not impact.plannable
    assert "does not fit" in impact.problem


@pytest.mark.parametrize(
    ("annotation", "says"),
    [
        (None, "no agent has reported this node's GPUs"),
        ("not json", "is not what the agent writes"),
        (json.dumps([{"index": 0, "mode": "enabled", "gpu_instances": []}]), "no pci_device_id"),
        (json.dumps([{"index": 0, "pci_device_id": 1, "gpu_instances": []}]), "is not in the catalog"),
    ],
)
def test_an_absent_or_foreign_report_says_why(annotation: str | None, says: str) -> None:
    with pytest.raises(UnreadableReportError, match=says):
        read_report(annotation)


def test_a_gpu_pod_the_report_does_not_place_yet_counts_as_evicted_when_the_node_changes() -> None:
    reported = read_report(report("all-1g.10gb", {(0, 0): ["ml/kept"]}))
    impact = with_pods_now(predict("n", reported, LAYOUTS, "all-balanced"), ["ml/kept", "ml/new"])
    assert impact.unreported == ("ml/new",)
    assert impact.evicts == ("ml/new",)  # ml/kept is on a GI the plan keeps
    unchanged = with_pods_now(predict("n", read_report(report("all-balanced")), LAYOUTS, "all-balanced"), ["ml/new"])
    assert (unchanged.unreported, unchanged.evicts) == (("ml/new",), ())
