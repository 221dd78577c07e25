"""Drainer logic against an in-memory cluster (our own port, not the kubernetes library)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from migagent.attempt.drain.drainer import Drainer
from migagent.clock import FakeClock
from migagent.errors import DrainBlockedError, TransientError
from migagent.node.port import EvictionOutcome, EvictionStatus, PodRef, PodView
from migagent_sim.doubles.builders import pod


@dataclass
class MemoryCluster:
    pods: dict[str, PodView]
    blocked: dict[str, int] = field(default_factory=dict)
    """pod name -> how many more eviction attempts answer 429."""
    failing: dict[str, int] = field(default_factory=dict)
    replace_on_evict: set[str] = field(default_factory=set)
    budgets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """pod name -> the PDBs its 429 names (none: a 429 whose body names no budget)."""
    evictions: list[str] = field(default_factory=list)
    deletions: list[str] = field(default_factory=list)
    lists: int = 0

    def evict(self, ref: PodRef) -> EvictionOutcome:
        self.evictions.append(ref.name)
        if self.failing.get(ref.name, 0) > 0:
            self.failing[ref.name] -= 1
            raise TransientError("evict: HTTP 500", delay=0.5)
        if ref.name not in self.pods:
            return EvictionOutcome(EvictionStatus.GONE)
        if self.blocked.get(ref.name, 0) != 0:
            self.blocked[ref.name] -= 1
            return EvictionOutcome(
                EvictionStatus.BLOCKED,
                "Cannot evict pod as it would violate the pod's disruption budget.",
                budgets=self.budgets.get(ref.name, ()),
            )
        self._remove(ref.name)
        return EvictionOutcome(EvictionStatus.EVICTED)

    def delete_pod(self, ref: PodRef, *, grace_period_s: int | None = None) -> None:
        self.deletions.append(ref.name)
        self._remove(ref.name)

    def _remove(self, name: str) -> None:
        old = self.pods.pop(name)
        if name in self.replace_on_evict:
            self.pods[name] = PodView(ref=PodRef(old.ref.namespace, name, "new-uid"))

    def read_pod(self, ref: PodRef) -> PodView | None:
        return self.pods.get(ref.name)

    def list_pods_on_node(self, *, label_selector: str | None = None, namespace: str | None = None) -> list[PodView]:
        self.lists += 1
        return list(self.pods.values())


def _cluster(*names: str) -> MemoryCluster:
    return MemoryCluster(pods={name: pod(name) for name in names})


def test_a_blocked_eviction_is_retried_with_growing_back_off_until_it_succeeds() -> None:
    cluster = _cluster("a")
    cluster.blocked["a"] = 4
    clock = FakeClock()
    result = Drainer(cluster, clock=clock, retry_initial_s=1.0, retry_max_s=4.0).drain(
        [cluster.pods["a"]], timeout_s=60
    )
    assert result.removed == (PodRef("team", "a", "uid-a"),)
    assert cluster.evictions == ["a"] * 5
    assert clock.sleeps == [1.0, 2.0, 4.0, 4.0]


def test_a_permanently_blocked_pod_times_out_naming_the_pod_and_its_budget() -> None:
    cluster = _cluster("a", "b")
    cluster.blocked["a"] = -1
    cluster.budgets["a"] = ("a-budget",)
    with pytest.raises(DrainBlockedError, match=r"team/a \(PodDisruptionBudget: a-budget\).*disruption budget") as info:
        Drainer(cluster, clock=FakeClock()).drain([cluster.pods["a"], cluster.pods["b"]], timeout_s=30)
    assert info.value.pods == ("team/a",)
    assert "b" not in cluster.pods


def test_a_timeout_after_a_429_that_named_no_budget_still_says_a_pdb_refused_the_pod() -> None:
    cluster = _cluster("a")
    cluster.blocked["a"] = -1
    with pytest.raises(DrainBlockedError, match=r"team/a \(a PodDisruptionBudget\): Cannot evict"):
        Drainer(cluster, clock=FakeClock()).drain([cluster.pods["a"]], timeout_s=30)


def test_a_timeout_after_server_errors_only_names_no_budget() -> None:
    cluster = _cluster("a")
    cluster.failing["a"] = 1000
    with pytest.raises(DrainBlockedError) as info:
        Drainer(cluster, clock=FakeClock()).drain([cluster.pods["a"]], timeout_s=30)
    assert "pod team/a: evict: HTTP 500" in str(info.value)
    assert "(PodDisruptionBudget" not in str(info.value)
    assert "(a PodDisruptionBudget)" not in str(info.value)


def test_a_pod_replaced_under_the_same_name_counts_as_gone() -> None:
    cluster = _cluster("sts-0")
    cluster.replace_on_evict.add("sts-0")
    result = Drainer(cluster, clock=FakeClock()).drain([cluster.pods["sts-0"]], timeout_s=10)
    assert result.removed == (PodRef("team", "sts-0", "uid-sts-0"),)
    assert cluster.pods["sts-0"].ref.uid == "new-uid"


def test_force_delete_deletes_instead_of_evicting() -> None:
    cluster = _cluster("a")
    cluster.blocked["a"] = -1
    Drainer(cluster, clock=FakeClock()).drain([cluster.pods["a"]], timeout_s=10, force_delete=True)
    assert cluster.deletions == ["a"]
    assert cluster.evictions == []


def test_transient_eviction_errors_are_retried() -> None:
    cluster = _cluster("a")
    cluster.failing["a"] = 2
    result = Drainer(cluster, clock=FakeClock()).drain([cluster.pods["a"]], timeout_s=10)
    assert len(result.removed) == 1
    assert cluster.evictions == ["a", "a", "a"]


def test_daemonset_and_mirror_pods_handed_to_the_drainer_are_left_alone() -> None:
    cluster = MemoryCluster(pods={"ds": pod("ds", owner="DaemonSet"), "static": pod("static", owner=None, mirror=True)})
    result = Drainer(cluster, clock=FakeClock()).drain(list(cluster.pods.values()), timeout_s=10, force_delete=True)
    assert result.removed == ()
    assert cluster.evictions == []
    assert cluster.deletions == []


@dataclass
class SlowTermination(MemoryCluster):
    """Evicted pods stay listed (Terminating) for `lists_left` more lists of the node's pods."""

    lists_left: int = 3
    leaving: dict[str, PodView] = field(default_factory=dict)

    def _remove(self, name: str) -> None:
        self.leaving[name] = self.pods.pop(name)

    def list_pods_on_node(self, *, label_selector: str | None = None, namespace: str | None = None) -> list[PodView]:
        self.lists += 1
        listed = [*self.pods.values(), *self.leaving.values()]
        self.lists_left -= 1
        if self.lists_left <= 0:
            self.leaving.clear()
        return listed


@pytest.mark.parametrize("count", [1, 10, 100])
def test_drain_progress_costs_one_list_per_poll_whatever_the_number_of_pods(count: int) -> None:
    names = [f"p{i}" for i in range(count)]
    cluster = SlowTermination(pods={name: pod(name) for name in names})
    result = Drainer(cluster, clock=FakeClock(), poll_interval_s=1.0).drain(list(cluster.pods.values()), timeout_s=60)
    assert len(result.removed) == count
    assert cluster.evictions == names
    assert cluster.lists == 4  # three that still show them Terminating, one that shows them gone


def test_the_polls_start_fast_and_slow_down_to_the_poll_interval() -> None:
    cluster = SlowTermination(pods={"a": pod("a")}, lists_left=7)
    clock = FakeClock()
    Drainer(cluster, clock=clock, poll_interval_s=1.0).drain([cluster.pods["a"]], timeout_s=60)
    assert clock.sleeps == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
