"""The autopilot on an in-memory pool with a fake clock: its guardrails, its history and Events, and no
flapping. The pool's scheduler binds what fits; its agents take `reconfigure_s` to change a node."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping

from migagent.autopilot.controller import Autopilot, load
from migagent.autopilot.decide import OPT_IN_LABEL, Guardrails
from migagent.autopilot.state import AutopilotState, Verdict
from migagent.rollout.port import LiveNode
from migagent.rollout.state import RolloutState
from migagent_sim.model_pool import Job, ModelPool
from tests.unit.demand.support import SEVEN_G, THREE_G, make_pool, model_node, run, wait

OPTED = {OPT_IN_LABEL: "enabled"}


class Quiet:
    def event(self, event: str, **fields: object) -> None:
        pass

    def progress(self, state: RolloutState, live: Mapping[str, LiveNode]) -> None:
        pass


def pilot(pool: ModelPool, **settings: object) -> Autopilot:
    guardrails = Guardrails(**{"persist_s": 300.0, "cooldown_s": 3600.0, "max_changes_per_hour": 2, **settings})  # type: ignore[arg-type]
    return Autopilot(pool, guardrails, clock=pool.clock, listener=Quiet())


def tick(pool: ModelPool, autopilot: Autopilot, seconds: float, *, poll: float = 30.0) -> None:
    elapsed = 0.0
    while elapsed < seconds:
        autopilot.step()
        pool.schedule()
        pool.advance(poll)
        elapsed += poll


def verdicts(pool: ModelPool) -> list[Verdict]:
    return [d.verdict for d in load(pool).history]


def test_demand_counts_only_once_it_has_waited_long_enough_then_a_rollout_serves_it() -> None:
    pool = make_pool(model_node("a", labels=OPTED), model_node("b", labels=OPTED))
    run(pool, "a", 14)
    waiting = wait(pool, 2, THREE_G)
    autopilot = pilot(pool)
    tick(pool, autopilot, 240)
    assert pool.relabels == []
    assert load(pool).history == ()
    tick(pool, autopilot, 600)
    assert [(node, layout) for _, node, layout in pool.relabels] == [("b", "all-balanced")]
    assert verdicts(pool) == [Verdict.CHANGED, Verdict.ROLLOUT_DONE]
    assert not set(waiting) & set(pool.pending)  # the scheduler placed them once b changed
    assert {r.pod.node_name for name, r in pool.running.items() if name in waiting} == {"b"}
    changed = next(e for e in pool.events if e.reason == "MigAutopilotChanged")
    assert changed.node == "b"
    assert "all-1g.10gb -> all-balanced: serves 2 pod(s), evicts 0" in changed.message
    assert any(e.reason == "MigAutopilotRolloutDone" and e.node == "b" for e in pool.events)
    assert load(pool).rollout is None


def test_only_opted_in_nodes_change() -> None:
    pool = make_pool(model_node("a", labels=OPTED), model_node("b"))
    run(pool, "a", 14)
    wait(pool, 2, THREE_G)
    autopilot = pilot(pool)
    tick(pool, autopilot, 900)
    assert pool.relabels == []
    assert verdicts(pool) == [Verdict.NO_CHANGE]
    assert any(e.reason == "MigAutopilotNoChange" and e.node is None for e in pool.events)


def test_a_node_in_its_cool_down_is_held_then_changes_once_it_is_over() -> None:
    pool = make_pool(model_node("a", labels=OPTED))
    wait(pool, 1, THREE_G)
    autopilot = pilot(pool, cooldown_s=1800.0)
    tick(pool, autopilot, 600)
    assert [layout for _, _, layout in pool.relabels] == ["all-balanced"]
    wait(pool, 1, SEVEN_G, priority=100, prefix="big")
    tick(pool, autopilot, 900)
    assert len(pool.relabels) == 1
    held = load(pool).history[-1]
    assert held.verdict is Verdict.HELD
    assert held.reasons[0].startswith("a: cool-down: changed to all-balanced")
    tick(pool, autopilot, 1200)
    assert [layout for _, _, layout in pool.relabels] == ["all-balanced", "all-7g.80gb"]


def test_at_most_n_changes_per_hour_per_pool() -> None:
    nodes = [model_node(name, labels=OPTED) for name in ("a", "b", "c")]
    pool = make_pool(*nodes)
    wait(pool, 10, THREE_G)  # a node offers at most four: three changes wanted
    autopilot = pilot(pool, max_changes_per_hour=2)
    tick(pool, autopilot, 1500)
    assert len(pool.relabels) == 2
    held = load(pool).history[-1]
    assert held.verdict is Verdict.HELD
    assert "made 2 change(s) in the last hour (--max-changes-per-hour 2)" in held.reasons[0]
    tick(pool, autopilot, 3600)
    assert len(pool.relabels) == 3
    times = [at for at, _, _ in pool.relabels]
    assert times[2] - times[0] >= 3600


def test_paused_it_records_what_it_would_do_and_changes_nothing_until_resumed() -> None:
    from dataclasses import replace

    from migagent.autopilot.controller import save

    pool = make_pool(model_node("a", labels=OPTED))
    wait(pool, 1, THREE_G)
    save(pool, replace(load(pool), paused=True))
    autopilot = pilot(pool)
    tick(pool, autopilot, 900)
    assert pool.relabels == []
    assert [(d.verdict, d.reasons) for d in load(pool).history] == [
        (Verdict.HELD, ("paused (migagent autopilot resume)",))
    ]
    assert load(pool).history[0].nodes["a"]["to"] == "all-balanced"
    save(pool, replace(load(pool), paused=False))
    tick(pool, autopilot, 300)
    assert [layout for _, _, layout in pool.relabels] == ["all-balanced"]


def test_dry_run_announces_the_change_and_makes_none() -> None:
    pool = make_pool(model_node("a", labels=OPTED))
    wait(pool, 1, THREE_G)
    tick(pool, pilot(pool, dry_run=True), 1800)
    assert pool.relabels == []
    assert verdicts(pool) == [Verdict.DRY_RUN]  # once, not once per look
    assert [e.reason for e in pool.events] == ["MigAutopilotDryRun"]


def test_a_demand_that_alternates_faster_than_it_must_persist_changes_nothing() -> None:
    pool = make_pool(model_node("a", labels=OPTED), model_node("b", labels=OPTED))
    autopilot = pilot(pool, persist_s=300.0)
    for round_ in range(24):  # two hours: every 4 minutes the wanted profile flips, unserved pods are withdrawn
        resource = THREE_G if round_ % 2 == 0 else SEVEN_G
        jobs = [Job(f"flip-{round_}-{i}", {resource: 1}, 600.0) for i in range(4)]
        for job in jobs:
            pool.submit(job)
        tick(pool, autopilot, 240)
        for job in jobs:
            pool.cancel(job.name)
    assert pool.relabels == []
    assert load(pool).history == ()


def test_a_demand_that_persists_while_alternating_changes_the_node_at_most_once_per_cool_down() -> None:
    pool = make_pool(model_node("a", labels=OPTED))
    autopilot = pilot(pool, persist_s=300.0, cooldown_s=3600.0, max_changes_per_hour=4)
    for round_ in range(12):  # three hours; every 15 minutes the wanted profile flips between 3g and 7g
        resource = THREE_G if round_ % 2 == 0 else SEVEN_G
        pool.submit(Job(f"flip-{round_}", {resource: 1}, 900.0))
        tick(pool, autopilot, 900)
    times = [at for at, _, _ in pool.relabels]
    assert 2 <= len(times) <= 3, pool.relabels  # it follows the demand, at the pace the cool-down allows
    assert all(later - earlier >= 3600 for earlier, later in itertools.pairwise(times))
    assert any(d.verdict is Verdict.HELD and "cool-down" in d.reasons[0] for d in load(pool).history)


def test_a_node_held_by_its_cool_down_is_recorded_once_not_at_every_look() -> None:
    """Issue 37 item 12: the held reason carried the seconds elapsed and left, so each look (30 s apart)
    recorded and announced it again."""
    pool = make_pool(model_node("a", labels=OPTED))
    wait(pool, 1, THREE_G)
    autopilot = pilot(pool, cooldown_s=1800.0)
    tick(pool, autopilot, 600)
    wait(pool, 1, SEVEN_G, priority=100, prefix="big")
    tick(pool, autopilot, 900)
    held = [d for d in load(pool).history if d.verdict is Verdict.HELD]
    assert len(held) == 1, [d.reasons for d in held]
    assert "may change again at" in held[0].reasons[0]
    assert sum(e.reason == "MigAutopilotHeld" for e in pool.events) == 1


def test_a_burst_of_one_owner_is_served_as_one_demand() -> None:
    """Issue 37 item 16: 8 pods of one owner arrive over 4 minutes; the look where the first has persisted
    sizes the change for all 8 (two nodes), not for the one or two that persisted then."""
    pool = make_pool(*(model_node(name, labels=OPTED) for name in ("a", "b", "c")))
    autopilot = pilot(pool, max_changes_per_hour=3)
    for index in range(8):
        pool.submit(Job(f"burst-{index}", {THREE_G: 1}, 10_000.0, owner="burst"))
        tick(pool, autopilot, 30)
    tick(pool, autopilot, 300)
    changed = [d for d in load(pool).history if d.verdict is Verdict.CHANGED]
    assert len(changed) == 1, [d.nodes for d in changed]
    assert sum(len(node["serves"]) for node in changed[0].nodes.values()) == 8


def test_holds_while_paused_name_the_pause_and_every_guardrail() -> None:
    """Issue 37 item 18: a node in its cool-down while paused was held citing the cool-down only."""
    from dataclasses import replace

    from migagent.autopilot.controller import save

    pool = make_pool(model_node("a", labels=OPTED))
    wait(pool, 1, THREE_G)
    autopilot = pilot(pool, cooldown_s=3600.0)
    tick(pool, autopilot, 600)
    save(pool, replace(load(pool), paused=True))
    wait(pool, 1, SEVEN_G, priority=100, prefix="big")
    tick(pool, autopilot, 600)
    held = load(pool).history[-1]
    assert held.verdict is Verdict.HELD
    assert held.reasons[0] == "paused (migagent autopilot resume)"
    assert any("a: cool-down" in reason for reason in held.reasons), held.reasons


def test_a_look_changes_at_most_its_budget_of_gpus() -> None:
    nodes = [model_node(name, labels=OPTED) for name in ("a", "b")]
    pool = make_pool(*nodes)
    wait(pool, 8, THREE_G)  # each node offers four in all-3g.40gb: both change, two GPUs each
    autopilot = pilot(pool, max_gpus_per_look=2)
    tick(pool, autopilot, 330)
    first = load(pool).history[0]
    assert first.verdict is Verdict.CHANGED
    assert len(first.nodes) == 1
    assert any("--max-gpus-per-look 2" in reason for reason in first.reasons), first.reasons
    tick(pool, autopilot, 600)
    assert len(pool.relabels) == 2


def test_pausing_stops_the_rollout_it_drives_after_the_wave_in_flight_and_resuming_runs_it_on() -> None:
    """Issue 37 item 18: paused, the rollout it had started went on relabelling nodes."""
    from dataclasses import replace

    from migagent.autopilot.controller import RolloutBudgets, save
    from migagent.rollout.budget import MaxUnavailable

    pool = make_pool(*(model_node(name, labels=OPTED) for name in ("a", "b", "c")))
    wait(pool, 12, THREE_G)  # each node offers four in all-3g.40gb: three changes, one node (2 GPUs) a wave
    autopilot = Autopilot(pool, Guardrails(persist_s=300.0, max_changes_per_hour=3), clock=pool.clock,
                          listener=Quiet(), budgets=RolloutBudgets(max_unavailable=MaxUnavailable(2)))
    while not pool.relabels:
        tick(pool, autopilot, 30)
    save(pool, replace(load(pool), paused=True))
    tick(pool, autopilot, 1800)
    assert len(pool.relabels) == 1  # the wave in flight finished; no other started
    held = load(pool).history[-1]
    assert (held.verdict, held.reasons[0]) == (Verdict.HELD, "paused (migagent autopilot resume)")
    assert "stopped after the wave in flight" in held.reasons[1]
    save(pool, replace(load(pool), paused=False))
    tick(pool, autopilot, 1800)
    assert len(pool.relabels) == 3
    assert verdicts(pool)[-1] is Verdict.ROLLOUT_DONE


class SlowLooks(Quiet):
    """Each look takes 40 s of the fake clock; stops the run after `looks` of them."""

    def __init__(self, pool: ModelPool, looks: int) -> None:
        self.events: list[tuple[str, dict[str, object]]] = []
        self.pool, self.looks, self.stop = pool, looks, threading.Event()

    def event(self, event: str, **fields: object) -> None:
        self.events.append((event, fields))


def test_a_look_that_overruns_its_interval_skips_the_looks_it_overlaps_and_says_so() -> None:
    pool = make_pool(model_node("a", labels=OPTED))
    listener = SlowLooks(pool, looks=5)
    autopilot = Autopilot(pool, Guardrails(), clock=pool.clock, listener=listener)
    started: list[float] = []
    step = autopilot.step

    def slow_step() -> AutopilotState:
        started.append(pool.clock.monotonic())
        pool.clock.advance(40.0)
        if len(started) == listener.looks:
            listener.stop.set()
        return step()

    autopilot.step = slow_step  # type: ignore[method-assign]
    autopilot.run(listener.stop, 15.0)
    assert started == [0.0, 45.0, 90.0, 135.0, 180.0]  # on the 15 s grid; never one after another
    skipped = [fields for event, fields in listener.events if event == "autopilot_looks_skipped"]
    assert [f["looks"] for f in skipped] == [2, 2, 2, 2, 2]
