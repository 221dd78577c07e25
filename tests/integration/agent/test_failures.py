"""Failures: each is undone, reported in one place with its reason, and retried without a label change."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from migagent.attempt.listener import Outcome
from migagent.node.names import ATTEMPT_ANNOTATION, LAST_ERROR_ANNOTATION, deploy_label
from migagent.reconcile.reboot import RecordingRebootRequester
from migagent.reconcile.retry import RetryPolicy
from migagent_sim.cluster import DEMO_LAYOUTS, AnySimulation, SimCluster, SimClusterConfig
from tests.integration.agent.support import (
    BLOCKING_FOR_NOW,
    SMALL_ALL_1G,
    SMALL_BALANCED,
    ImpatientClock,
    JsonDict,
    advertised,
    advertised_of,
    assert_released,
    condition,
    condition_reason,
    eventually,
    node_annotations,
    node_when,
    request_counts,
    state,
    state_of,
    workload_names,
)


def _guarded_workload(cluster: SimCluster, *, disruptions_allowed: int) -> None:
    """A pod on a GI that all-balanced destroys (GPU 0, slot 6), guarded by a PodDisruptionBudget."""
    cluster.kubelet.run_workload("ml", "inference-0", mig_uuid=cluster.mig_uuid(0, 6), labels={"app": "inference"})
    cluster.api.add_pdb(
        "ml", "inference-pdb", match_labels={"app": "inference"}, disruptions_allowed=disruptions_allowed
    )


def _blocked_evictions(cluster: SimCluster) -> int:
    return sum(1 for r in cluster.api.requests if r.subresource == "eviction" and r.status == 429)


def test_a_blocking_pdb_makes_the_agent_wait_and_it_succeeds_once_the_pdb_allows(cluster: SimCluster) -> None:
    _guarded_workload(cluster, disruptions_allowed=0)
    cluster.api.set_pdb_status("ml", "inference-pdb", BLOCKING_FOR_NOW)  # blocks for now, not for good
    running = cluster.start_agent()
    eventually(lambda: state(cluster) == "success", what="the starting layout reported")
    cluster.label("all-balanced")
    eventually(lambda: _blocked_evictions(cluster) >= 2, what="the eviction refused by the PDB, twice")
    assert state(cluster) == "pending"
    assert condition(cluster)["reason"] == "Draining"

    cluster.api.set_pdb_disruptions_allowed("ml", "inference-pdb", 1)
    node_when(cluster, lambda n: advertised_of(n) == SMALL_BALANCED and state_of(n) == "success", what="all-balanced")
    running.stop()
    assert "inference-0" not in workload_names(cluster)
    assert_released(cluster)


def test_a_pdb_that_never_allows_is_refused_before_the_node_is_cordoned_or_paused(cluster: SimCluster) -> None:
    _guarded_workload(cluster, disruptions_allowed=0)  # minAvailable 1 with 1 pod expected: never
    agent, _ = cluster.build_agent(cluster.options(drain_timeout_s=0.5))
    cluster.label("all-balanced")
    node_writes: list[JsonDict] = []
    cluster.api.on_node_changed(node_writes.append)

    assert agent.reconcile_once() is Outcome.FAILED

    assert not any(n["spec"].get("unschedulable") for n in node_writes), "the node was cordoned"
    assert all(
        v != "paused-for-mig-change" for n in node_writes for v in n["metadata"].get("labels", {}).values()
    ), "an operand was paused"
    assert not [r for r in cluster.api.requests if r.subresource == "eviction"]

    assert state(cluster) == "failed"
    failed = condition(cluster)
    assert (failed["status"], failed["reason"]) == ("False", "DrainBlocked")
    assert "ml/inference-0" in failed["message"]
    assert "inference-pdb" in failed["message"]
    warnings = [e for e in cluster.api.events() if e.get("type") == "Warning"]
    assert [e["reason"] for e in warnings] == ["MigDrainBlocked"]
    assert "inference-pdb" in warnings[0]["message"]
    assert_released(cluster)
    assert cluster.node()["metadata"]["labels"][deploy_label("device-plugin")] == "true"
    assert "inference-0" in workload_names(cluster)
    assert advertised(cluster) == SMALL_ALL_1G, "the GPUs were not touched and the plugin is back"
    assert agent.retry_in_s is not None


def test_a_failed_node_is_retried_with_backoff_without_a_label_change(cluster: SimCluster) -> None:
    # The label names a layout the mounted file lacks: InvalidLayout, nothing touched. Then the
    # ConfigMap is updated; the agent's own retry picks it up.
    cluster.layout_file.write_text(DEMO_LAYOUTS.replace("all-balanced:", "balanced-later:"), encoding="utf-8")
    running = cluster.start_agent()
    cluster.label("all-balanced")
    eventually(lambda: condition_reason(cluster) == "InvalidLayout", what="the missing layout reported")
    assert state(cluster) == "failed"
    assert "all-balanced" in node_annotations(cluster)[LAST_ERROR_ANNOTATION]
    assert not cluster.node()["spec"].get("unschedulable")
    assert cluster.node()["metadata"]["labels"][deploy_label("device-plugin")] == "true"

    def attempts() -> int:
        return int(node_annotations(cluster).get(ATTEMPT_ANNOTATION, "0"))

    eventually(lambda: attempts() >= 2, what="a retry with no label change")

    cluster.layout_file.write_text(DEMO_LAYOUTS, encoding="utf-8")
    node_when(cluster, lambda n: state_of(n) == "success" and advertised_of(n) == SMALL_BALANCED, what="the retry")
    running.stop()
    assert LAST_ERROR_ANNOTATION not in node_annotations(cluster)
    assert_released(cluster)


def test_a_layout_that_does_not_fit_fails_as_layout_does_not_fit_and_touches_nothing(cluster: SimCluster) -> None:
    too_many = '  too-many:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n        "1g.10gb": 8\n'
    cluster.layout_file.write_text(DEMO_LAYOUTS + too_many, encoding="utf-8")
    agent, _ = cluster.build_agent()
    cluster.label("too-many")

    assert agent.reconcile_once() is Outcome.FAILED

    assert condition(cluster)["reason"] == "LayoutDoesNotFit"
    assert request_counts(cluster)["create pods/eviction"] == 0
    assert advertised(cluster) == SMALL_ALL_1G
    assert_released(cluster)


def test_a_layout_the_device_plugin_cannot_advertise_is_refused_before_anything_changes(cluster: AnySimulation) -> None:
    agent, _ = cluster.build_agent()
    cluster.label("not-advertisable")

    assert agent.reconcile_once() is Outcome.FAILED

    assert condition(cluster)["reason"] == "InvalidLayout"
    assert "1c.3g.40gb" in condition(cluster)["message"]
    assert advertised(cluster) == SMALL_ALL_1G


def test_server_errors_and_conflicts_during_a_change_still_converge(cluster: SimCluster) -> None:
    running = cluster.start_agent(clock=ImpatientClock())
    eventually(lambda: state(cluster) == "success", what="the starting layout reported")
    node = cluster.config.node_name
    cluster.api.inject_fault("PATCH", f"/nodes/{node}$", 500, times=2)
    cluster.api.inject_fault("PATCH", f"/nodes/{node}/status$", 409, times=2)
    cluster.api.inject_fault("GET", "/pods$", 503, times=7)  # more than one call retries: the attempt fails
    cluster.api.inject_fault("POST", "/eviction$", 500, times=1)
    cluster.kubelet.run_workload("ml", "w", mig_uuid=cluster.mig_uuid(1, 6))
    cluster.label("all-balanced")

    node_when(cluster, lambda n: state_of(n) == "success" and advertised_of(n) == SMALL_BALANCED, what="convergence")
    running.stop()
    statuses = [r.status for r in cluster.api.requests]
    assert statuses.count(500) >= 2
    assert statuses.count(409) >= 2
    assert statuses.count(503) == 7
    assert "w" not in workload_names(cluster)
    assert_released(cluster)


def test_dropped_watches_and_expired_resource_versions_still_deliver_the_label_change(cluster: SimCluster) -> None:
    running = cluster.start_agent()
    eventually(lambda: state(cluster) == "success", what="the starting layout reported")
    eventually(lambda: cluster.api.drop_watches() > 0, what="an open watch to drop")
    cluster.api.compact()
    cluster.label("all-balanced")
    node_when(cluster, lambda n: advertised_of(n) == SMALL_BALANCED and state_of(n) == "success", what="all-balanced")
    cluster.api.compact()
    eventually(lambda: cluster.api.drop_watches() > 0, what="the watch re-established")
    cluster.label("all-1g.10gb")
    node_when(cluster, lambda n: advertised_of(n) == SMALL_ALL_1G and state_of(n) == "success", what="back to all-1g")
    running.stop()
    assert running.source.relists >= 3


def test_drift_is_repaired_by_the_periodic_recheck_without_a_label_change(cluster: SimCluster) -> None:
    options = cluster.options()
    options = options.__class__(**{**options.__dict__, "watch": options.watch.__class__(resync_period_s=0.3)})
    running = cluster.start_agent(options)
    eventually(lambda: state(cluster) == "success", what="the starting layout reported")
    # Someone destroys an instance behind the agent's back.
    with cluster.driver() as driver:
        gi = next(gi for gi in driver.observe().gpu(1).gpu_instances if gi.placement.start == 3)
        for ci in gi.compute_instances:
            driver.destroy_compute_instance(1, gi_id=gi.id, ci_id=ci.id)
        driver.destroy_gpu_instance(1, gi_id=gi.id)
    eventually(lambda: len(cluster.fake.state.gpus[1].gpu_instances) == 7, what="the GI recreated")
    node_when(cluster, lambda n: advertised_of(n) == SMALL_ALL_1G and state_of(n) == "success", what="re-advertised")
    running.stop()
    assert_released(cluster)


def test_the_layout_file_is_read_again_at_every_reconcile(cluster: SimCluster) -> None:
    agent, _ = cluster.build_agent()
    cluster.label("all-balanced")
    edited = DEMO_LAYOUTS.replace('"1g.10gb": 2\n        "2g.20gb": 1', '"1g.10gb": 4')
    cluster.layout_file.write_text(edited, encoding="utf-8")
    assert agent.reconcile_once() is Outcome.APPLIED
    assert advertised(cluster) == {"nvidia.com/mig-1g.10gb": 8, "nvidia.com/mig-3g.40gb": 2}


def test_a_gpu_that_cannot_be_reset_gets_one_reboot_request_and_the_node_says_rebooting(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    # An A100 in a pass-through VM: enabling MIG needs a reset the platform refuses, so only a reboot helps.
    cluster = make_cluster(SimClusterConfig(spec="1xA100-80GB", start_layout=None))
    cluster.fake.sim_set_reset_supported(0, False)
    requester = RecordingRebootRequester()
    agent, _ = cluster.build_agent(reboot_requester=requester)
    cluster.label("all-balanced")

    assert agent.reconcile_once() is Outcome.REBOOTING

    assert state(cluster) == "rebooting"
    assert len(requester.reasons) == 1
    assert condition_reason(cluster) == "RebootRequired"


def test_paused_labels_are_restored_by_the_undo_when_the_pause_cannot_clean_up_after_itself(
    cluster: SimCluster,
) -> None:
    # Right after the labels are paused, the API server fails every pod list and node read long
    # enough that the pause's own clean-up gives up too; the attempt's undo must still restore them.
    node = cluster.config.node_name
    injected: list[bool] = []

    def api_outage_once_paused(changed: JsonDict) -> None:
        labels = changed["metadata"].get("labels", {})
        if labels.get(deploy_label("device-plugin")) == "paused-for-mig-change" and not injected:
            injected.append(True)
            cluster.api.inject_fault("GET", "/pods$", 503, times=5)
            cluster.api.inject_fault("GET", f"/nodes/{node}$", 503, times=5)

    cluster.api.on_node_changed(api_outage_once_paused)
    agent, _ = cluster.build_agent(clock=ImpatientClock())
    cluster.label("all-balanced")

    assert agent.reconcile_once() is Outcome.FAILED

    assert injected
    assert_released(cluster)
    assert cluster.node()["metadata"]["labels"][deploy_label("device-plugin")] == "true"
    assert advertised(cluster) == SMALL_ALL_1G


def test_a_pdb_that_blocks_for_ever_gets_attempts_spaced_by_the_back_off_not_by_the_resync(cluster: SimCluster) -> None:
    _guarded_workload(cluster, disruptions_allowed=0)
    cluster.api.set_pdb_status("ml", "inference-pdb", BLOCKING_FOR_NOW)  # never lifted in this test
    options = cluster.options(
        drain_timeout_s=0.3, retry=RetryPolicy(failure_backoff_initial=1.0, failure_backoff_max=4.0)
    )
    options = replace(options, watch=replace(options.watch, resync_period_s=0.1))  # a resync tick every 0.1 s
    cordoned_at: list[float] = []

    def seen(node: JsonDict) -> None:
        if node["spec"].get("unschedulable") and (not cordoned_at or cordoned_at[-1] < 0):
            cordoned_at.append(time.monotonic())
        elif not node["spec"].get("unschedulable") and cordoned_at and cordoned_at[-1] > 0:
            cordoned_at.append(-time.monotonic())  # uncordoned: the attempt is over

    cluster.api.on_node_changed(seen)
    running = cluster.start_agent(options)
    eventually(lambda: state(cluster) == "success", what="the starting layout reported")
    cluster.label("all-balanced")
    eventually(lambda: len([t for t in cordoned_at if t > 0]) >= 3, what="three attempts", timeout_s=30)
    running.stop()

    starts = [t for t in cordoned_at if t > 0]
    ends = [-t for t in cordoned_at if t < 0]
    # Attempt k+1 starts no earlier than the back-off after attempt k ended (1 s, then 2 s), although a
    # resync tick came every 0.1 s: without the hold, the next attempt started right after each failure.
    assert starts[1] - ends[0] >= 1.0
    assert starts[2] - ends[1] >= 2.0
    assert condition(cluster)["reason"] in ("DrainBlocked", "Reconfiguring", "Draining")
