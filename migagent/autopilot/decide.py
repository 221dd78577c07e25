"""One look of the autopilot, pure: from the pool, the waiting pods and its state to a decision.

Guardrails, in the order they apply:
- demand persists: a pending pod counts only once it has waited --persist seconds (a demand that
  comes and goes faster changes nothing), or once a pod of its owner asking the same has (a burst is
  one demand: the change is sized for all of it, not for its first pods);
- opt-in: only nodes selected by --selector (the label `migagent.io/autopilot=enabled`) are seen;
- cool-down: a node the autopilot changed less than --cooldown seconds ago may not change again;
- at most --max-changes-per-hour node changes per pool (nodes sharing the --pool-label value) in any
  trailing hour, and at most --max-gpus-per-look GPUs changed by the changes one look starts; when the
  advice wants more, those serving the most pods go first;
- the pause switch (`migagent autopilot pause`): the decision is recorded as held, nothing changes;
- --dry-run: recorded as what it would have done, nothing changes.
A change that would serve waiting pods but is stopped by a guardrail is `held` (with that guardrail as
the reason); pods no allowed change can serve give `no-change` with the advice's reasons.
"""

from __future__ import annotations

import datetime
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
PAUSED = "paused (migagent autopilot resume)"
_REASONS_SHOWN = 5


@dataclass(frozen=True)
class Guardrails:
    selector: str = OPT_IN_SELECTOR
    pool_label: str | None = None
    persist_s: float = 300.0
    max_changes_per_hour: int = 2
    max_gpus_per_look: int = 16
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
            frozen[node.name] = (f"cool-down: changed to {last.layout} at {_utc(last.at)}, may change again at"
                                 f" {_utc(last.at + guardrails.cooldown_s)} (--cooldown)")
            continue
        pool = pool_of(node, guardrails)
        used = state.changes_since(pool, now - HOUR_S)
        if used >= guardrails.max_changes_per_hour:
            where = f"pool {pool}" if pool else "the pool"
            frozen[node.name] = (f"{where} made {used} change(s) in the last hour"
                                 f" (--max-changes-per-hour {guardrails.max_changes_per_hour})")
    return frozen


def _utc(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, tz=datetime.UTC).strftime("%H:%M:%SZ")


def _allowed(
    advice: Advice, now: float, guardrails: Guardrails, state: AutopilotState, nodes: Sequence[DemandNode]
) -> tuple[dict[str, str], dict[str, str]]:
    """The advised changes within what each pool has left this hour and the look's GPU budget, those serving
    most pods first; and why each other waits."""
    pools = {node.name: pool_of(node, guardrails) for node in nodes}
    left = {pool: guardrails.max_changes_per_hour - state.changes_since(pool, now - HOUR_S) for pool in pools.values()}
    gpus_left = guardrails.max_gpus_per_look
    ranked = sorted((n for n in advice.nodes if n.changes and n.impact is not None),
                    key=lambda n: (-len(n.serves), len(n.impact.evicts) if n.impact else 0, n.node))
    targets: dict[str, str] = {}
    waits: dict[str, str] = {}
    for node in ranked:
        pool, gpus = pools[node.node], len(node.impact.gpus_changed) if node.impact else 0
        if left[pool] <= 0:
            waits[node.node] = f"{'pool ' + pool if pool else 'the pool'} has no change left this hour" \
                               f" (--max-changes-per-hour {guardrails.max_changes_per_hour})"
        elif gpus > gpus_left:
            waits[node.node] = (f"{gpus} GPU(s) to change, {gpus_left} left of this look's"
                                f" --max-gpus-per-look {guardrails.max_gpus_per_look}")
        elif node.target is not None:
            targets[node.node] = node.target
            left[pool] -= 1
            gpus_left -= gpus
    return targets, waits


def _persisting(pods: Sequence[DemandPod], now: float, persist_s: float) -> list[DemandPod]:
    """The pending pods that are demand: waited --persist, or a pod of their owner asking the same has."""
    pending = [p for p in pods if p.pending and is_mig_demand(p.requests)]
    lasting = {(p.owner, tuple(sorted(p.requests.items()))) for p in pending if now - p.created >= persist_s}
    return [p for p in pending if now - p.created >= persist_s
            or (p.owner and (p.owner, tuple(sorted(p.requests.items()))) in lasting)]


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
    waited = _persisting(pods, now, guardrails.persist_s)
    if not waited:
        return Outcome(None)
    bound = [p for p in pods if p.node_name]
    view = DemandView(nodes=nodes, pods=[*bound, *waited], layout=layout, budgets=budgets, now=now)
    frozen = _frozen(now, guardrails, state, nodes)
    advice = advise(view, AdviseOptions(frozen=frozen), cache=cache)
    targets, waits = _allowed(advice, now, guardrails, state, nodes)
    paused = (PAUSED,) if state.paused else ()
    if not targets:
        return _without_change(now, advice, view, {**frozen, **waits}, cache, waiting=len(waited), paused=paused)
    records = {name: _node_record(advice, name) for name in targets}
    waiting = tuple(f"{name}: {why}" for name, why in sorted(waits.items()))
    if state.paused:
        return Outcome(Decision(now, Verdict.HELD, (*paused, *waiting), records, waiting=len(waited)))
    if guardrails.dry_run:
        return Outcome(Decision(now, Verdict.DRY_RUN, ("--dry-run", *waiting), records, waiting=len(waited)))
    pools = {node.name: pool_of(node, guardrails) for node in nodes}
    by_name = {node.name: node for node in nodes}
    changes = tuple(Change(name, pools[name], now, layout_name, by_name[name].layout)
                    for name, layout_name in sorted(targets.items()))
    return Outcome(Decision(now, Verdict.CHANGED, waiting, records, waiting=len(waited)), targets, changes)


def _without_change(
    now: float, advice: Advice, view: DemandView, frozen: Mapping[str, str], cache: CandidateCache | None,
    *, waiting: int, paused: tuple[str, ...],
) -> Outcome:
    """No change allowed now: nothing to record when all that waits fits where it is (the scheduler
    places it); `held` when a change would serve it but a guardrail stops it; else `no-change`."""
    if all(p.node is not None for p in advice.pods):
        return Outcome(None)
    unfrozen = advise(view, cache=cache) if frozen else advice
    held = sorted(n.node for n in unfrozen.nodes if n.changes)
    if held:
        reasons = (*paused, *(f"{name}: {frozen[name]}" for name in held if name in frozen))
        return Outcome(Decision(now, Verdict.HELD, reasons, {name: _node_record(unfrozen, name) for name in held},
                                waiting=waiting))
    return Outcome(Decision(now, Verdict.NO_CHANGE, _unserved_reasons(advice), waiting=waiting))
