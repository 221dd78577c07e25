"""The advice over an in-memory pool: which node changes to which layout, for which waiting pods, at what price."""

from __future__ import annotations

from dataclasses import replace

import yaml

from migagent.demand.advise import AdviseOptions, advise
from migagent.layout.parse import parse_layout
from migagent.layout.strategy import MigStrategy
from migagent.node.budgets import PdbView
from migagent.node.names import GPU_RESOURCE, OBSERVED_ANNOTATION
from migagent.node.scheduling import DemandNode, Taint
from migagent.rollout.impact import predict, with_pods_now
from migagent.rollout.port import gpu_pods
from migagent.rollout.reported import read_report
from migagent.rollout.scope import impact_of
from tests.unit.demand.support import ONE_G, SEVEN_G, THREE_G, make_pool, model_node, run, view, wait


def test_a_pending_pod_that_fits_now_changes_nothing() -> None:
    pool = make_pool(model_node("a"))
    run(pool, "a", 13)
    (pending,) = wait(pool, 1, ONE_G)
    advice = advise(view(pool))
    assert advice.changes == {}
    assert advice.pod(pending) is not None
    assert (advice.pod(pending).node, advice.pod(pending).after_change) == ("a", False)  # type: ignore[union-attr]


def test_an_idle_node_changes_for_the_waiting_pods_at_the_price_rollout_plan_shows() -> None:
    pool = make_pool(model_node("a"), model_node("b"))
    run(pool, "a", 14)
    waiting = wait(pool, 2, THREE_G)
    advice = advise(view(pool))
    assert advice.changes == {"b": "all-balanced"}  # serves both, evicts none, destroys the fewest GIs
    assert {advice.pod(p).node for p in waiting} == {"b"}  # type: ignore[union-attr]
    node = pool.list_nodes("")[1]
    expected = with_pods_now(impact_of(node, pool.layout, "all-balanced"), gpu_pods(pool.list_pods_on_node("b")))
    advised = advice.node("b")
    assert advised is not None
    assert advised.impact == expected
    assert advised.impact.evicts == ()
    assert advice.totals()["served_after_changes"] == 2


def test_pods_of_equal_priority_are_never_evicted() -> None:
    pool = make_pool(model_node("a"))
    run(pool, "a", 14, priority=100)
    (pending,) = wait(pool, 1, THREE_G, priority=100)
    advice = advise(view(pool))
    assert advice.changes == {}
    reason = advice.pod(pending).reason  # type: ignore[union-attr]
    assert "they evict pods of priority >= 100" in reason, reason


def test_lower_priority_pods_are_evicted_for_a_higher_priority_pod_and_higher_ones_never() -> None:
    pool = make_pool(model_node("a"), model_node("b"))
    low = run(pool, "a", 14, priority=0, prefix="low")
    high = run(pool, "b", 14, priority=1000, prefix="high")
    (pending,) = wait(pool, 1, THREE_G, priority=100)
    advice = advise(view(pool))
    assert set(advice.changes) == {"a"}
    impact = advice.node("a").impact  # type: ignore[union-attr]
    assert impact is not None
    assert impact.evicts
    assert set(impact.evicts) <= set(low)
    assert not set(impact.evicts) & set(high)
    assert advice.pod(pending).node == "a"  # type: ignore[union-attr]


def test_capacity_in_use_is_reclaimed_only_when_no_idle_capacity_serves_the_demand() -> None:
    pool = make_pool(model_node("a"), model_node("b"))
    run(pool, "a", 14, priority=0)
    wait(pool, 2, THREE_G, priority=100)
    advice = advise(view(pool))
    assert set(advice.changes) == {"b"}
    assert advice.totals()["pods_evicted"] == 0


def test_evictions_stay_within_every_pod_disruption_budget() -> None:
    pool = make_pool(model_node("a"))
    run(pool, "a", 14, priority=0)
    for running in pool.running.values():
        running.pod = replace(running.pod, labels={"app": "train"})
    (pending,) = wait(pool, 1, THREE_G, priority=100)
    closed = PdbView("ml", "train", match_labels={"app": "train"}, disruptions_allowed=0)
    advice = advise(view(pool, budgets=[closed]))
    assert advice.changes == {}
    reason = advice.pod(pending).reason  # type: ignore[union-attr]
    assert "PodDisruptionBudget ml/train allows 0 disruption(s)" in reason, reason
    roomy = replace(closed, disruptions_allowed=50)
    assert advise(view(pool, budgets=[roomy])).changes == {"a": "all-balanced"}


def test_a_node_whose_agent_has_not_reported_is_never_changed() -> None:
    pool = make_pool(model_node("a"), model_node("b"))
    run(pool, "a", 14)
    (pending,) = wait(pool, 1, THREE_G)
    silent = [n if n.name == "a" else DemandNode(replace(n.view, annotations={})) for n in view(pool).nodes]
    advice = advise(replace(view(pool), nodes=silent))
    assert advice.changes == {}
    assert "its agent has not reported" in advice.node("b").not_changed  # type: ignore[union-attr]
    assert "its agent has not reported" in advice.pod(pending).reason  # type: ignore[union-attr]


def test_a_node_in_the_middle_of_a_change_is_left_alone() -> None:
    pool = make_pool(model_node("a"), model_node("b"))
    run(pool, "a", 14)
    wait(pool, 1, SEVEN_G)
    pool.set_layout(pool.nodes["b"].view(), "all-3g.40gb")  # its agent is at work
    advice = advise(view(pool))
    assert advice.changes == {}
    assert advice.node("b").not_changed  # type: ignore[union-attr]


def test_node_selectors_and_taints_decide_which_nodes_may_serve_a_pod() -> None:
    pool = make_pool(model_node("a", labels={"zone": "a"}), model_node("b", labels={"zone": "b"}))
    (pending,) = wait(pool, 1, THREE_G, selector={"zone": "b"})
    assert advise(view(pool)).changes == {"b": "all-balanced"}
    tainted = advise(view(pool, taints={"b": (Taint("dedicated", "NoSchedule", "infer"),)}))
    assert tainted.changes == {}
    reason = tainted.pod(pending).reason  # type: ignore[union-attr]
    assert "b: taint dedicated=infer:NoSchedule is not tolerated" in reason
    assert "a: nodeSelector zone=b does not match" in reason


def test_a_generated_layout_repartitions_idle_gpus_keeps_busy_ones_and_is_valid() -> None:
    pool = make_pool(model_node("a"))
    run(pool, "a", 7)  # GPU 0 full, GPU 1 idle
    waiting = wait(pool, 2, THREE_G)
    plain = advise(view(pool))
    assert plain.changes == {}
    assert "--generate" in plain.pod(waiting[0]).reason  # type: ignore[union-attr]
    advice = advise(view(pool), AdviseOptions(generate=True))
    (target,) = advice.changes.values()
    assert target.startswith("generated-")
    impact = advice.node("a").impact  # type: ignore[union-attr]
    assert impact is not None
    assert (impact.evicts, impact.gpus_changed) == ((), (1,))
    assert {advice.pod(p).node for p in waiting} == {"a"}  # type: ignore[union-attr]
    assert advice.generated is not None
    generated = parse_layout(yaml.safe_dump(dict(advice.generated)), source="generated")  # as an admin adds it
    reported = read_report(pool.list_nodes("")[0].annotations[OBSERVED_ANNOTATION])
    replayed = predict("a", reported, generated, target)
    assert replayed.plannable, replayed.problem
    assert replayed.capacity_after[THREE_G] == 2
    assert replayed.capacity_after[ONE_G] == 7


def test_single_strategy_nodes_serve_gpu_requests_with_uniform_layouts_only() -> None:
    pool = make_pool(model_node("a", "all-7g.80gb"))
    waiting = wait(pool, 5, SEVEN_G)
    single = view(pool)
    pods = [replace(p, requests={GPU_RESOURCE: 1}) for p in single.pods]
    node = single.nodes[0]
    nodes = [DemandNode(replace(node.view, allocatable={GPU_RESOURCE: 2}))]
    advice = advise(replace(single, pods=pods, nodes=nodes))
    assert advice.changes == {"a": "all-1g.10gb"}  # two fit now, three more after the change
    assert {advice.pod(p).node for p in waiting} == {"a"}  # type: ignore[union-attr]
    forced = advise(replace(single, pods=pods, nodes=nodes), AdviseOptions(strategy=MigStrategy.SINGLE))
    assert forced.changes == advice.changes


def test_a_change_that_would_evict_a_pod_no_drain_moves_is_never_proposed() -> None:
    pool = make_pool(model_node("a"))
    run(pool, "a", 14, priority=0)
    (pending,) = wait(pool, 1, THREE_G, priority=100)
    daemons = [replace(p, owner_kinds=("DaemonSet",)) if p.node_name else p for p in view(pool).pods]
    advice = advise(replace(view(pool), pods=daemons))
    assert advice.changes == {}
    assert "a DaemonSet pod" in advice.pod(pending).reason  # type: ignore[union-attr]


def test_a_pod_no_layout_serves_says_so() -> None:
    pool = make_pool(model_node("a"))
    (pending,) = wait(pool, 1, "nvidia.com/mig-4g.40gb")
    reason = advise(view(pool)).pod(pending).reason  # type: ignore[union-attr]
    assert reason.startswith("no layout in the file offers nvidia.com/mig-4g.40gb=1 on the nodes it may run on (a)")


def test_as_many_evictions_the_change_evicting_the_lowest_priorities_wins() -> None:
    """Issue 37 item 17: a and b would each evict the seven pods of one GPU for the 7g pod; b's are of lower
    priority. Before: a, the first by name."""
    pool = make_pool(model_node("a"), model_node("b"))
    run(pool, "a", 14, priority=10, prefix="ten")
    run(pool, "b", 14, priority=5, prefix="five")
    (pending,) = wait(pool, 1, SEVEN_G, priority=100)
    advice = advise(view(pool))
    assert set(advice.changes) == {"b"}, advice.changes
    assert advice.pod(pending).node == "b"  # type: ignore[union-attr]


def test_a_pod_blocked_by_a_budget_and_by_the_priority_rule_hears_of_both() -> None:
    """Issue 37 item 18: the change that would serve it evicts pods of its priority and overdraws a budget;
    before, its reason named the priority rule only."""
    pool = make_pool(model_node("a"))
    run(pool, "a", 14, priority=5)
    for running in pool.running.values():
        running.pod = replace(running.pod, labels={"app": "train"})
    wait(pool, 1, THREE_G, priority=10, prefix="urgent")
    (equal,) = wait(pool, 1, THREE_G, priority=5, prefix="equal")
    closed = PdbView("ml", "train", match_labels={"app": "train"}, disruptions_allowed=0)
    reason = advise(view(pool, budgets=[closed])).pod(equal).reason  # type: ignore[union-attr]
    assert "they evict pods of priority >= 5" in reason, reason
    assert "PodDisruptionBudget ml/train allows 0 disruption(s)" in reason, reason
