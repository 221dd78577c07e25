"""One look of the autopilot, pure: from the pool, the waiting pods and its state to a decision.

Guardrails, in the order they apply:
- demand persists: a pending pod counts only once it has waited --persist seconds (a demand that
  comes and goes faster changes nothing);
- opt-in: only nodes selected by --selector (the label `migagent.io/autopilot=enabled`) are seen;
- cool-down: a node the autopilot changed less than --cooldown seconds ago may not change again;
- at most --max-changes-per-hour node changes per pool (nodes sharing the --pool-label value) in any
  trailing hour; when the advice wants more, those serving the most pods go first;
- the pause switch (`migagent autopilot pause`): the decision is recorded as held, nothing changes;
- --dry-run: recorded as what it would have done, nothing changes.
A change that would serve waiting pods but is stopped by a guardrail is `held` (with that guardrail as
the reason); pods no allowed change can serve give `no-change` with the advice's reasons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from migagent.autopilot.state import AutopilotState, Change, Decision, Verdict
from migagent.demand.advice import Advice
from migagent.demand.advise import AdviseOptions, CandidateCache, DemandView, advise
from migagent.layout.spec import LayoutFile
from migagent.node.scheduling import DemandNode, DemandPod, is_mig_demand
from migagent.rollout.budget import DisruptionBudget

HOUR_S = 3600.0
OPT_IN_LABEL = "migagent.io/autopilot"
OPT_IN_SELECTOR = f"{OPT_IN_LABEL}=enabled"
_REASONS_SHOWN = 5


@dataclass(frozen=True)
class Guardrails:
    selector: str = OPT_IN_SELECTOR
    pool_label: str | None = None
    persist_s: float = 300.0
    max_changes_per_hour: int = 2
    cooldown_s: float = 3600.0
    dry_run: bool = False


@dataclass(frozen=True)
class Outcome:
    decision: Decision | None
    """None: nothing waits long enough, or what waits fits where it is (the scheduler's to place)."""
    targets: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Node -> layout, to start as a rollout now (empty unless the verdict is `changed`)."""
    changes: tuple[Change, ...] = ()


def pool_of(node: DemandNode, guardrails: Guardrails) -> str:
    return node.view.labels.get(guardrails.pool_label, "") if guardrails.pool_label else ""


def _frozen(now: float, guardrails: Guardrails, state: AutopilotState, nodes: Sequence[DemandNode]) -> dict[str, str]:
    frozen: dict[str, str] = {}
    for node in nodes:
        last = state.last_change(node.name)
        if last is not None and now - last.at < guardrails.cooldown_s:
            left = guardrails.cooldown_s - (now - last.at)
            frozen[node.name] = f"cool-down: changed to {last.layout} {now - last.at:.0f}s ago, {left:.0f}s left"
            continue
        pool = pool_of(node, guardrails)
        used = state.changes_since(pool, now - HOUR_S)
        if used >= guardrails.max_changes_per_hour:
            where = f"pool {pool}" if pool else "the pool"
            frozen[node.name] = (f"{where} made {used} change(s) in the last hour"
                                 f" (--max-changes-per-hour {guardrails.max_changes_per_hour})")
    return frozen


def _within_hourly_limit(
    advice: Advice, now: float, guardrails: Guardrails, state: AutopilotState, nodes: Sequence[DemandNode]
) -> dict[str, str]:
    """The advised changes, at most what each pool has left this hour, those serving most pods first."""
    pools = {node.name: pool_of(node, guardrails) for node in nodes}
    left = {pool: guardrails.max_changes_per_hour - state.changes_since(pool, now - HOUR_S) for pool in pools.values()}
    ranked = sorted((n for n in advice.nodes if n.changes),
                    key=lambda n: (-len(n.serves), len(n.impact.evicts) if n.impact else 0, n.node))
    targets: dict[str, str] = {}
    for node in ranked:
        pool = pools[node.node]
        if left[pool] > 0 and node.target is not None:
            targets[node.node] = node.target
            left[pool] -= 1
    return targets


def _node_record(advice: Advice, name: str) -> dict[str, Any]:
    node = advice.node(name)
    assert node is not None
    assert node.impact is not None
    return {"from": node.layout, "to": node.target, "serves": list(node.serves), "evicts": list(node.impact.evicts),
            "gpus_changed": list(node.impact.gpus_changed)}


def _unserved_reasons(advice: Advice) -> tuple[str, ...]:
    reasons = sorted({f"{p.pod}: {p.reason}" for p in advice.pods if p.node is None})
    more = len(reasons) - _REASONS_SHOWN
    return (*reasons[:_REASONS_SHOWN], *((f"and {more} more pod(s)",) if more > 0 else ()))


def decide(
    now: float,
    guardrails: Guardrails,
    state: AutopilotState,
    *,
    nodes: Sequence[DemandNode],
    pods: Sequence[DemandPod],
    layout: LayoutFile,
    budgets: Sequence[DisruptionBudget],
    cache: CandidateCache | None = None,
) -> Outcome:
    waited = [p for p in pods if p.pending and is_mig_demand(p.requests) and now - p.created >= guardrails.persist_s]
    if not waited:
        return Outcome(None)
    bound = [p for p in pods if p.node_name]
    view = DemandView(nodes=nodes, pods=[*bound, *waited], layout=layout, budgets=budgets, now=now)
    frozen = _frozen(now, guardrails, state, nodes)
    advice = advise(view, AdviseOptions(frozen=frozen), cache=cache)
    targets = _within_hourly_limit(advice, now, guardrails, state, nodes)
    if not targets:
        return _without_change(now, advice, view, frozen, cache, waiting=len(waited))
    records = {name: _node_record(advice, name) for name in targets}
    if state.paused:
        return Outcome(Decision(now, Verdict.HELD, ("paused (migagent autopilot resume)",), records,
                                waiting=len(waited)))
    if guardrails.dry_run:
        return Outcome(Decision(now, Verdict.DRY_RUN, ("--dry-run",), records, waiting=len(waited)))
    pools = {node.name: pool_of(node, guardrails) for node in nodes}
    by_name = {node.name: node for node in nodes}
    changes = tuple(Change(name, pools[name], now, layout_name, by_name[name].layout)
                    for name, layout_name in sorted(targets.items()))
    return Outcome(Decision(now, Verdict.CHANGED, (), records, waiting=len(waited)), targets, changes)


def _without_change(
    now: float, advice: Advice, view: DemandView, frozen: Mapping[str, str], cache: CandidateCache | None,
    *, waiting: int,
) -> Outcome:
    """No change allowed now: nothing to record when all that waits fits where it is (the scheduler
    places it); `held` when a change would serve it but a guardrail stops it; else `no-change`."""
    if all(p.node is not None for p in advice.pods):
        return Outcome(None)
    unfrozen = advise(view, cache=cache) if frozen else advice
    held = sorted(n.node for n in unfrozen.nodes if n.changes)
    if held:
        reasons = tuple(f"{name}: {frozen[name]}" for name in held if name in frozen)
        return Outcome(Decision(now, Verdict.HELD, reasons, {name: _node_record(unfrozen, name) for name in held},
                                waiting=waiting))
    return Outcome(Decision(now, Verdict.NO_CHANGE, _unserved_reasons(advice), waiting=waiting))
