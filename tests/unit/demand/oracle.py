"""Today's search (migagent/demand/advise.py at aa28b54), kept as the oracle the new search is checked
against (tests/unit/demand/test_advise_differential.py): the same rounds, each re-pricing every open node
against every waiting pod. Cubic in the pool's size; small pools only. One change since (issue 37 item
17): as many pods evicted, the change evicting the lowest priorities wins. The reasons are the product's
explain() over this search's state."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from migagent.demand.advice import Advice, NodeAdvice, PodAdvice
from migagent.demand.advise import AdviseOptions, CandidateCache, DemandView
from migagent.demand.candidates import NO_EVICTION, Candidate, evaluate, offered
from migagent.demand.explain import explain
from migagent.demand.generate import config_name, generate_node, generated_layout, layout_document
from migagent.demand.nodes import free, infer_strategy, read_reported
from migagent.layout.spec import LayoutFile
from migagent.layout.strategy import MigStrategy
from migagent.node.names import OBSERVED_ANNOTATION, is_gpu_resource
from migagent.node.scheduling import DemandNode, DemandPod, is_mig_demand
from migagent.rollout.budget import pdb_overdraws
from migagent.rollout.reported import ReportedNode


@dataclass
class Slot:
    node: DemandNode
    reported: ReportedNode | None
    strategy: MigStrategy
    bound: list[DemandPod]
    free_now: dict[str, int]
    not_changed: str
    layout: LayoutFile
    names: list[str] | None = None
    candidates: dict[str, Candidate] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name

    def may_run(self, pod: DemandPod) -> str | None:
        if self.node.view.unschedulable:
            return "cordoned"
        return pod.may_run_on(self.name, self.node.view.labels, self.node.taints)


def pending_order(pods: Sequence[DemandPod]) -> list[DemandPod]:
    return sorted((p for p in pods if p.pending and is_mig_demand(p.requests)),
                  key=lambda p: (-p.priority, p.created, p.name))


def _slot(node: DemandNode, view: DemandView, options: AdviseOptions) -> Slot:
    reported, why = read_reported(node)
    if not why and node.name in options.frozen:
        why = options.frozen[node.name]
    strategy = options.strategy or infer_strategy(node.view, reported)
    if not why and strategy is MigStrategy.NONE:
        why = "its device plugin ignores MIG (strategy none): no layout changes what it offers"
    bound = [p for p in view.pods if p.node_name == node.name and not p.finished]
    capacity = {name: count for name, count in node.view.allocatable.items() if is_gpu_resource(name)}
    return Slot(node, reported, strategy, bound, free(capacity, bound), why, view.layout)


class _Search:
    def __init__(self, view: DemandView, options: AdviseOptions, cache: CandidateCache | None) -> None:
        self.view = view
        self.options = options
        self.cache = cache
        self.pending = pending_order(view.pods)
        self.levels = sorted({p.priority for p in self.pending}, reverse=True)
        self.slots = [_slot(n, view, options) for n in sorted(view.nodes, key=lambda n: n.name)]
        self.assigned: dict[str, str] = {}
        self.changed: dict[str, Candidate] = {}
        self.generated: dict[str, dict[int, dict[str, int]]] = {}
        self.pod_labels = {p.name: dict(p.labels) for p in view.pods}

    @property
    def generating(self) -> bool:
        return self.options.generate

    # --- step 1 ---------------------------------------------------------------------------------------

    def place_now(self) -> None:
        for pod in self.pending:
            fitting = [
                s for s in self.slots
                if s.may_run(pod) is None and all(s.free_now.get(r, 0) >= n for r, n in pod.requests.items())
            ]
            if not fitting:
                continue
            slot = min(fitting, key=lambda s: (sum(s.free_now.get(r, 0) - n for r, n in pod.requests.items()), s.name))
            for resource, count in pod.requests.items():
                slot.free_now[resource] -= count
            self.assigned[pod.name] = slot.name

    # --- steps 2 and 3 --------------------------------------------------------------------------------

    def score(self, pods: Sequence[DemandPod]) -> tuple[int, ...]:
        return tuple(sum(1 for p in pods if p.priority == level) for level in self.levels)

    def layout_names(self, slot: Slot) -> list[str]:
        """The layouts the node may change to (the file's that resolve on its GPUs, and with --generate its
        own), not its current one."""
        if slot.reported is None:
            return []
        if slot.names is None:
            if self.options.generate and slot.strategy is MigStrategy.MIXED:
                slot.layout = self._with_generated(slot)
            slot.names = [n for n in slot.layout.names if n != slot.node.layout
                          and offered(slot.reported, slot.layout, n, slot.strategy) is not None]
        return slot.names

    def candidate(self, slot: Slot, name: str) -> Candidate:
        if name not in slot.candidates:
            slot.candidates[name] = self._evaluate(slot, name)
        return slot.candidates[name]

    def candidates_of(self, slot: Slot) -> list[Candidate]:
        return [self.candidate(slot, name) for name in self.layout_names(slot)]

    def _evaluate(self, slot: Slot, name: str) -> Candidate:
        assert slot.reported is not None
        key = (slot.name, slot.node.view.annotations.get(OBSERVED_ANNOTATION), slot.layout.configs[name], name,
               slot.strategy, tuple((p.name, p.priority, p.owner_kinds, p.finished) for p in slot.bound))
        found = self.cache.get(key) if self.cache is not None else None
        if found is None:
            found = evaluate(slot.node, slot.reported, slot.layout, name, strategy=slot.strategy,
                             bound={p.name: p for p in slot.bound})
            if self.cache is not None:
                self.cache[key] = found
        return found

    def _with_generated(self, slot: Slot) -> LayoutFile:
        assert slot.reported is not None
        demand = [(r, p.priority) for p in self.pending if slot.may_run(p) is None
                  for r, n in p.requests.items() for _ in range(n)]
        changes = generate_node(slot.reported, demand)
        if not changes:
            return slot.layout
        name = config_name(changes)
        self.generated[name] = changes
        return LayoutFile(slot.layout.path, {**slot.layout.configs, **generated_layout(name, changes).configs})

    def change(self, *, allow_evictions: bool) -> None:
        while True:
            best: tuple[tuple[object, ...], Slot, Candidate, list[DemandPod]] | None = None
            for slot in self.slots:
                if slot.not_changed or slot.name in self.changed:
                    continue
                pool = [p for p in self.pending if self.assigned.get(p.name) in (None, slot.name)
                        and slot.may_run(p) is None]
                if all(p.name in self.assigned for p in pool):
                    continue
                before = self.score([p for p in pool if self.assigned.get(p.name) == slot.name])
                wanted = {r for p in pool if p.name not in self.assigned for r in p.requests}
                for name in self.layout_names(slot):
                    assert slot.reported is not None
                    if not (offered(slot.reported, slot.layout, name, slot.strategy) or set()) & wanted:
                        continue  # it creates nothing a waiting pod asks for
                    candidate = self.candidate(slot, name)
                    key = self._value(slot, candidate, pool, before, allow_evictions=allow_evictions)
                    if key is not None and (best is None or key[0] > best[0]):
                        best = (key[0], slot, candidate, key[1])
            if best is None:
                return
            _, slot, candidate, placed = best
            self.changed[slot.name] = candidate
            for pod in self.pending:
                if self.assigned.get(pod.name) == slot.name:
                    del self.assigned[pod.name]
            for pod in placed:
                self.assigned[pod.name] = slot.name

    def _value(
        self, slot: Slot, candidate: Candidate, pool: list[DemandPod], before: tuple[int, ...], *, allow_evictions: bool
    ) -> tuple[tuple[object, ...], list[DemandPod]] | None:
        if candidate.problem or not candidate.impact.changes or (candidate.evictions and not allow_evictions):
            return None
        placed, _ = fill(candidate.free, pool, above=candidate.floor)
        gain = tuple(a - b for a, b in zip(self.score(placed), before, strict=True))
        if gain <= tuple(0 for _ in gain):
            return None
        if candidate.evictions:
            others = [c.impact for c in self.changed.values()]
            overdrawn = pdb_overdraws([*others, candidate.impact], self.view.budgets, self.pod_labels)
            if overdrawn:
                return None
        impact = candidate.impact
        key = (gain, -candidate.evictions, tuple(-p for p in candidate.victims), -len(impact.gpus_changed),
               -impact.gis_destroyed, -impact.gis_created)
        return key, placed

    def overdraws(self, candidate: Candidate) -> str:
        others = [c.impact for c in self.changed.values()]
        return "; ".join(pdb_overdraws([*others, candidate.impact], self.view.budgets, self.pod_labels))

    # --- the result -----------------------------------------------------------------------------------

    def result(self) -> Advice:
        nodes = tuple(
            NodeAdvice(
                node=s.name, layout=s.node.layout,
                target=self.changed[s.name].layout if s.name in self.changed else None,
                impact=self.changed[s.name].impact if s.name in self.changed else None,
                serves=tuple(p.name for p in self.pending if self.assigned.get(p.name) == s.name),
                not_changed=s.not_changed,
            )
            for s in self.slots
        )
        pods = tuple(
            PodAdvice(
                pod=p.name, priority=p.priority, requests=dict(p.requests), node=self.assigned.get(p.name),
                after_change=self.assigned.get(p.name) in self.changed,
                reason="" if p.name in self.assigned else explain(self, p, [s for s in self.slots
                                                                              if s.may_run(p) is None]),
                waited_s=max(0.0, self.view.now - p.created) if self.view.now else 0.0,
            )
            for p in self.pending
        )
        used = {c.layout for c in self.changed.values()}
        chosen = {name: changes for name, changes in self.generated.items() if name in used}
        return Advice(nodes=nodes, pods=pods, generated=layout_document(chosen) if chosen else None)


def oracle_advise(
    view: DemandView, options: AdviseOptions | None = None, *, cache: CandidateCache | None = None
) -> Advice:
    """The advice for `view` (see the module's docstring); `cache` keeps candidate prices between calls."""
    search = _Search(view, options or AdviseOptions(), cache)
    search.place_now()
    search.change(allow_evictions=False)
    search.change(allow_evictions=True)
    return search.result()


def fill(
    units: Mapping[str, int],
    pods: Sequence[DemandPod],
    *,
    above: int = NO_EVICTION,
    may_run: Callable[[DemandPod], bool] = lambda _: True,
) -> tuple[list[DemandPod], dict[str, int]]:
    """Pods (in the order given) whose whole request fits what is left, those of priority above `above`
    only; returns them and the units left."""
    left = dict(units)
    placed: list[DemandPod] = []
    for pod in pods:
        if pod.priority <= above or not may_run(pod):
            continue
        if all(left.get(resource, 0) >= count for resource, count in pod.requests.items()):
            for resource, count in pod.requests.items():
                left[resource] -= count
            placed.append(pod)
    return placed, left
