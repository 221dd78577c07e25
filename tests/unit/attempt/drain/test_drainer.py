"""Drainer logic against the in-memory port (migagent_sim.doubles.MemoryKube, not the kubernetes library)."""

from __future__ import annotations

import threading

import pytest

from migagent.attempt.drain.drainer import Drainer, DrainInterruptedError
from migagent.clock import FakeClock
from migagent.errors import DrainBlockedError, TransientError
from migagent.node.budgets import PdbView
from migagent.node.port import PodRef, PodView
from migagent_sim.doubles.builders import pod
from migagent_sim.doubles.memory_kube import MemoryKube


def _cluster(*names: str, pods: tuple[PodView, ...] = (), terminating_lists: int = 0) -> MemoryKube:
    kube = MemoryKube(terminating_lists=terminating_lists)
    for each in (*pods, *(pod(name) for name in names)):
        kube.add_pod(each)
    return kube


def _pod(kube: MemoryKube, name: str) -> PodView:
    return next(p for p in kube.pods.values() if p.ref.name == name)


def _ref(name: str) -> PodRef:
    return PodRef("team", name, f"uid-{name}")


def _evicted(kube: MemoryKube) -> list[str]:
    return [ref.name for ref in kube.evictions]


def test_a_blocked_eviction_is_retried_with_growing_back_off_until_it_succeeds() -> None:
    cluster = _cluster("a")
    cluster.refusals[_ref("a")] = 4
    clock = FakeClock()
    result = Drainer(cluster, clock=clock, retry_initial_s=1.0, retry_max_s=4.0).drain(
        [_pod(cluster, "a")], timeout_s=60
    )
    assert result.removed == (_ref("a"),)
    assert _evicted(cluster) == ["a"] * 5
    assert clock.sleeps == [1.0, 2.0, 4.0, 4.0]


def test_a_permanently_blocked_pod_times_out_naming_the_pod_and_its_budget() -> None:
    cluster = _cluster("a", "b")
    cluster.pdbs.append(PdbView("team", "a-budget", match_labels={"app": "a"}, disruptions_allowed=0))
    with pytest.raises(DrainBlockedError, match=r"team/a \(PodDisruptionBudget: a-budget\).*disruption budget") as info:
        Drainer(cluster, clock=FakeClock()).drain([_pod(cluster, "a"), _pod(cluster, "b")], timeout_s=30)
    assert info.value.pods == ("team/a",)
    assert [p.ref.name for p in cluster.pods.values()] == ["a"]


def test_a_timeout_after_a_429_that_named_no_budget_still_says_a_pdb_refused_the_pod() -> None:
    cluster = _cluster("a")
    cluster.refusals[_ref("a")] = -1
    with pytest.raises(DrainBlockedError, match=r"team/a \(a PodDisruptionBudget\): Cannot evict"):
        Drainer(cluster, clock=FakeClock()).drain([_pod(cluster, "a")], timeout_s=30)


def test_a_timeout_after_server_errors_only_names_no_budget() -> None:
    cluster = _cluster("a")
    cluster.fail("evict", TransientError("evict: HTTP 500", delay=0.5), times=1000)
    with pytest.raises(DrainBlockedError) as info:
        Drainer(cluster, clock=FakeClock()).drain([_pod(cluster, "a")], timeout_s=30)
    assert "pod team/a: evict: HTTP 500" in str(info.value)
    assert "(PodDisruptionBudget" not in str(info.value)
    assert "(a PodDisruptionBudget)" not in str(info.value)


def test_a_pod_replaced_under_the_same_name_counts_as_gone() -> None:
    cluster = _cluster("sts-0")
    cluster.replaced.add(_ref("sts-0"))
    result = Drainer(cluster, clock=FakeClock()).drain([_pod(cluster, "sts-0")], timeout_s=10)
    assert result.removed == (_ref("sts-0"),)
    assert _pod(cluster, "sts-0").ref.uid == "uid-sts-0-replacement"


def test_force_delete_deletes_instead_of_evicting() -> None:
    cluster = _cluster("a")
    cluster.refusals[_ref("a")] = -1
    Drainer(cluster, clock=FakeClock()).drain([_pod(cluster, "a")], timeout_s=10, force_delete=True)
    assert cluster.calls.count("delete_pod") == 1
    assert cluster.evictions == []
    assert not cluster.pods


def test_transient_eviction_errors_are_retried() -> None:
    cluster = _cluster("a")
    cluster.fail("evict", TransientError("evict: HTTP 500", delay=0.5), times=2)
    result = Drainer(cluster, clock=FakeClock()).drain([_pod(cluster, "a")], timeout_s=10)
    assert len(result.removed) == 1
    assert cluster.calls.count("evict") == 3


def test_daemonset_and_mirror_pods_handed_to_the_drainer_are_left_alone() -> None:
    cluster = _cluster(pods=(pod("ds", owner="DaemonSet"), pod("static", owner=None, mirror=True)))
    result = Drainer(cluster, clock=FakeClock()).drain(list(cluster.pods.values()), timeout_s=10, force_delete=True)
    assert result.removed == ()
    assert cluster.evictions == []
    assert "delete_pod" not in cluster.calls


@pytest.mark.parametrize("count", [1, 10, 100])
def test_drain_progress_costs_one_list_per_poll_whatever_the_number_of_pods(count: int) -> None:
    names = [f"p{i}" for i in range(count)]
    cluster = _cluster(*names, terminating_lists=3)
    result = Drainer(cluster, clock=FakeClock(), poll_interval_s=1.0).drain(list(cluster.pods.values()), timeout_s=60)
    assert len(result.removed) == count
    assert _evicted(cluster) == names
    # three lists that still show them Terminating, one that shows them gone
    assert cluster.calls.count("list_pods_on_node") == 4


def test_the_polls_start_fast_and_slow_down_to_the_poll_interval() -> None:
    cluster = _cluster("a", terminating_lists=7)
    clock = FakeClock()
    Drainer(cluster, clock=clock, poll_interval_s=1.0).drain([_pod(cluster, "a")], timeout_s=60)
    assert clock.sleeps == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


def test_a_stop_requested_before_the_drain_evicts_nothing_and_names_every_pod_still_there() -> None:
    # SIGTERM as the drain starts: the successor evicts, and waits for what it evicted, itself. An eviction
    # sent on the way out left a terminating pod whose process the successor could not place (its plan saw
    # a process no pod held, and refused the change).
    cluster = _cluster("a", "b")
    stop = threading.Event()
    stop.set()
    with pytest.raises(DrainInterruptedError, match=r"still on the node: team/a, team/b"):
        Drainer(cluster, clock=FakeClock()).drain([_pod(cluster, "a"), _pod(cluster, "b")], timeout_s=60, stop=stop)
    assert _evicted(cluster) == []


def test_a_stop_with_nothing_left_to_drain_is_a_finished_drain() -> None:
    stop = threading.Event()
    stop.set()
    result = Drainer(_cluster(), clock=FakeClock()).drain([], timeout_s=60, stop=stop)
    assert result.removed == ()
