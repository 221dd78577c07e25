"""The in-memory KubePort refuses what the API server refuses where the agent relies on it."""

from __future__ import annotations

import pytest

from migagent.errors import PermanentError
from migagent.node.budgets import PdbView
from migagent.node.port import EvictionStatus, NodeChangedError, PodRef, PodView
from migagent_sim.doubles.memory_kube import MemoryKube


def test_a_conditional_write_at_a_stale_resource_version_is_refused_with_409_and_writes_nothing() -> None:
    kube = MemoryKube()
    stale = kube.get_node().resource_version
    kube.set_label_for_test("nvidia.com/mig.config", "all-7g")
    with pytest.raises(NodeChangedError, match="409"):
        kube.patch_metadata(labels={"nvidia.com/mig.config.state": "success"}, resource_version=stale)
    fresh = kube.get_node()
    assert "nvidia.com/mig.config.state" not in fresh.labels
    version = fresh.resource_version
    written = kube.patch_metadata(labels={"nvidia.com/mig.config.state": "pending"}, resource_version=version)
    assert written.resource_version != fresh.resource_version, "every write bumps the resourceVersion"


def test_a_node_that_does_not_exist_answers_404_to_reads_and_writes() -> None:
    kube = MemoryKube(exists=False)
    with pytest.raises(PermanentError, match="HTTP 404"):
        kube.get_node()
    with pytest.raises(PermanentError, match="HTTP 404"):
        kube.set_unschedulable(True)


def test_an_eviction_a_budget_refuses_is_blocked_naming_it_and_a_gone_pod_is_gone() -> None:
    ref = PodRef("ml", "a", "uid-a")
    kube = MemoryKube(pods={ref: PodView(ref=ref, labels={"app": "a"})})
    kube.pdbs.append(PdbView("ml", "a-budget", match_labels={"app": "a"}, disruptions_allowed=0))
    blocked = kube.evict(ref)
    assert (blocked.status, blocked.budgets) == (EvictionStatus.BLOCKED, ("a-budget",))
    kube.pdbs.clear()
    assert kube.evict(ref).status is EvictionStatus.EVICTED
    assert kube.evict(ref).status is EvictionStatus.GONE
