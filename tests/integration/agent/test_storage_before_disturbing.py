"""Storage is checked before the node is disturbed, and the Node tells the truth when the agent cannot
work: a journal directory that cannot be written fails the attempt with a reason naming it before any
cordon, pause or eviction; a journal that is not a record is dropped and the change converges."""

from __future__ import annotations

import errno

from migagent.attempt.listener import Outcome
from migagent.node.names import MIG_CONFIG_STATE_LABEL
from migagent_sim.cluster import SimCluster
from tests.integration.agent.support import (
    SMALL_ALL_1G,
    SMALL_BALANCED,
    JsonDict,
    advertised,
    assert_released,
    condition,
    eventually,
    state,
    workload_names,
)
from tests.storage_faults import unwritable_directory


def _disturbances(writes: list[JsonDict]) -> list[str]:
    found = [f"cordon at rv {n['metadata']['resourceVersion']}" for n in writes if n["spec"].get("unschedulable")]
    found += [k for n in writes for k, v in n["metadata"].get("labels", {}).items() if v == "paused-for-mig-change"]
    return found


def test_a_journal_directory_that_cannot_be_written_fails_before_any_cordon_pause_or_eviction(
    cluster: SimCluster,
) -> None:
    cluster.kubelet.run_workload("ml", "train", mig_uuid=cluster.mig_uuid(0, 6))  # on a GI the change destroys
    writes: list[JsonDict] = []
    cluster.api.on_node_changed(writes.append)
    with unwritable_directory(cluster.journal_dir) as code:
        running = cluster.start_agent()
        cluster.label("all-balanced")
        eventually(lambda: state(cluster) == "failed" or None, what="the node reported failed")
        running.stop()
    failed = condition(cluster)
    assert failed["reason"] == "StorageUnwritable"
    assert str(cluster.journal_dir) in failed["message"]
    assert errno.errorcode[code] in failed["message"]
    assert _disturbances(writes) == []
    assert not [r for r in cluster.api.requests if r.subresource == "eviction"]
    assert "train" in workload_names(cluster)
    assert advertised(cluster) == SMALL_ALL_1G
    assert_released(cluster)


def test_once_the_journal_directory_is_writable_again_the_retry_applies(cluster: SimCluster) -> None:
    with unwritable_directory(cluster.journal_dir):
        agent, _ = cluster.build_agent()
        cluster.label("all-balanced")
        assert agent.reconcile_once() is Outcome.FAILED
    assert agent.reconcile_once() is Outcome.APPLIED
    assert cluster.node()["metadata"]["labels"][MIG_CONFIG_STATE_LABEL] == "success"
    assert advertised(cluster) == SMALL_BALANCED


def test_a_null_journal_is_dropped_and_the_change_converges_in_one_attempt(cluster: SimCluster) -> None:
    cluster.journal_dir.mkdir(parents=True, exist_ok=True)
    (cluster.journal_dir / "journal.json").write_text("null", encoding="utf-8")
    agent, _ = cluster.build_agent()
    cluster.label("all-balanced")
    assert agent.reconcile_once() is Outcome.APPLIED
    assert advertised(cluster) == SMALL_BALANCED
    assert_released(cluster)
