"""Cordon ownership and the StatusReporter, through the fake apiserver."""

from __future__ import annotations

from migagent.attempt.report.status import StatusReporter
from migagent.attempt.window.cordon import Cordon
from migagent.kube.adapter import KubeApi
from migagent.node.names import ConditionReason
from migagent_sim.apiserver import FakeApiServer

from .conftest import NODE

OURS = "migagent.io/cordoned-by-migagent"


def _node(server: FakeApiServer) -> dict:  # type: ignore[type-arg]
    return server.node(NODE)


def test_migagent_uncordons_a_node_it_cordoned_and_clears_its_mark(api: KubeApi, server: FakeApiServer) -> None:
    cordon = Cordon(api)
    assert cordon.cordon() is True
    assert _node(server)["spec"]["unschedulable"] is True
    assert _node(server)["metadata"]["annotations"][OURS] == "true"
    assert cordon.uncordon() is True
    assert not _node(server)["spec"].get("unschedulable")
    assert OURS not in _node(server)["metadata"]["annotations"]


def test_an_admin_cordon_is_remembered_and_never_lifted(api: KubeApi, server: FakeApiServer) -> None:
    server.update_node(NODE, lambda node: node["spec"].update(unschedulable=True))
    cordon = Cordon(api)
    assert cordon.cordon() is False
    assert OURS not in _node(server)["metadata"]["annotations"]
    assert cordon.uncordon() is False
    assert _node(server)["spec"]["unschedulable"] is True


def test_a_cordon_left_by_an_interrupted_attempt_is_still_recognised_as_ours(
    api: KubeApi, server: FakeApiServer
) -> None:
    Cordon(api).cordon()
    again = Cordon(api)  # a restarted agent
    assert again.cordon() is True
    assert again.uncordon() is True
    assert not _node(server)["spec"].get("unschedulable")


def test_uncordon_on_a_node_nobody_cordoned_writes_nothing(api: KubeApi, server: FakeApiServer) -> None:
    server.clear_requests()
    assert Cordon(api).uncordon() is False
    assert [r for r in server.requests if r.verb == "patch"] == []


def test_a_failed_attempt_reports_state_condition_annotations_and_a_warning_event(
    api: KubeApi, server: FakeApiServer
) -> None:
    reporter = StatusReporter(api)
    reporter.pending('{"layout":"all-3g.20gb"}', "applying all-3g.20gb")
    reporter.failed(ConditionReason.DRAIN_BLOCKED, "pod team/a is guarded by PDB strict", attempt=3)
    node = _node(server)
    assert node["metadata"]["labels"]["nvidia.com/mig.config.state"] == "failed"
    assert node["metadata"]["annotations"]["migagent.io/last-error"] == "pod team/a is guarded by PDB strict"
    assert node["metadata"]["annotations"]["migagent.io/attempt"] == "3"
    assert node["metadata"]["annotations"]["migagent.io/desired"] == '{"layout":"all-3g.20gb"}'
    condition = node["status"]["conditions"][-1]
    assert (condition["type"], condition["status"], condition["reason"]) == ("MigConfigReady", "False", "DrainBlocked")
    assert [(e["reason"], e["type"]) for e in server.events()] == [
        ("MigReconfiguring", "Normal"),
        ("MigDrainBlocked", "Warning"),
    ]


def test_success_clears_the_last_error_and_records_what_is_observed(api: KubeApi, server: FakeApiServer) -> None:
    reporter = StatusReporter(api)
    reporter.failed(ConditionReason.APPLY_FAILED, "boom", attempt=1)
    reporter.succeeded(desired="d", observed="[]", message="all-1g.5gb applied", plan='{"created":7}')
    annotations = _node(server)["metadata"]["annotations"]
    assert "migagent.io/last-error" not in annotations
    assert "migagent.io/attempt" not in annotations
    assert (annotations["migagent.io/observed"], annotations["migagent.io/plan"]) == ("[]", '{"created":7}')
    assert _node(server)["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"
    assert _node(server)["status"]["conditions"][-1]["status"] == "True"


def test_an_event_that_cannot_be_recorded_does_not_fail_the_report(api: KubeApi, server: FakeApiServer) -> None:
    server.inject_fault("POST", r"/events$", 403, times=5)
    StatusReporter(api).progress(ConditionReason.DRAINING, "evicting 1 pod")
    assert _node(server)["status"]["conditions"][-1]["reason"] == "Draining"
    assert server.events() == []
