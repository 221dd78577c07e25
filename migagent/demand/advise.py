"""The advice: which nodes to change to which layout so that the most pending pods can run, for the
fewest evictions and GPUs changed.

    pending pods, highest priority first, then longest waiting
    -> 1. each one that fits now (free devices on a node it may run on) is placed there, best fit
    -> 2. changes that evict nothing: repeatedly, the (node, layout) serving the most pods still
          waiting (counted per priority level, highest first), then evicting fewest (the lowest
          priorities first), changing fewest GPUs, destroying fewest GIs; until none serves one more pod
    -> 3. the same, now allowing changes that evict: capacity in use is reclaimed only for pods
          step 2 could not serve, and only from pods of strictly lower priority than every pod the
          change serves; the evictions of all changes together stay within every PodDisruptionBudget
    -> what is still waiting gets its reason (explain.py)

Equal priority never evicts: that would swap one waiting pod for another and cost a restart. A node
is changed only when its agent has reported and settled (nodes.read_reported); a change that would
evict a pod no drain can move (DaemonSet, static, controller-less) is never proposed. Each node is
changed at most once per advice. Non-GPU resources (CPU, memory) are the scheduler's to judge.

At fleet scale, steps 2 and 3 pick what pricing every option of every node again each round would
pick (tests/unit/demand/oracle.py does), without doing it. Pods alike to the scheduler (selector,
affinity, tolerations: a group) share the nodes they may run on and wait in one queue per group and
request; a node's pool is its queues merged. Each node's options sit in a heap under their keys; a key
priced before the last change bounds the option's value now and is priced again when it comes out on
top: taking pods away only lowers a change's value while the pods it serves ask one profile, except by
k - 1 pods per pod asking k devices (added to its bound). With a pod asking two profiles among the
first its change could serve, or a pod given back, the nodes concerned are priced again at once.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from migagent.demand.advice import Advice, NodeAdvice, PodAdvice
from migagent.demand.candidates import Candidate, evaluate, offered
from migagent.demand.explain import explain
from migagent.demand.generate import config_name, generate_node, generated_layout, layout_document
from migagent.demand.nodes import free, infer_strategy, read_reported
from migagent.layout.spec import LayoutFile
from migagent.layout.strategy import MigStrategy
from migagent.node.names import OBSERVED_ANNOTATION, is_gpu_resource
from migagent.node.scheduling import DemandNode, DemandPod, is_mig_demand
from migagent.rollout.budget import DisruptionBudget, pdb_draws, pdb_overdrawn
from migagent.rollout.reported import ReportedNode

CandidateCache = MutableMapping[tuple[object, ...], Candidate]
Requests = tuple[tuple[str, int], ...]
Queue = tuple[int, Requests]
"""The pending pods of one group asking one request."""
Key = tuple[list[int], tuple[object, ...]]
"""What the oracle compares, largest first: the pods served per priority level (highest first) beyond
those placed there now; then, negated: evictions, the evicted pods' priorities (highest first), GPUs
changed, GIs destroyed, GIs created."""


@dataclass(frozen=True)
class DemandView:
    """What the advice reads: the nodes in scope, every GPU pod (pending and bound), the budgets."""

    nodes: Sequence[DemandNode]
    pods: Sequence[DemandPod]
    layout: LayoutFile
    budgets: Sequence[DisruptionBudget] = ()
    now: float = 0.0


@dataclass(frozen=True)
class AdviseOptions:
    generate: bool = False
    strategy: MigStrategy | None = None
    """The device plugin's strategy on every node; None: read per node from what it advertises."""
    frozen: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Nodes that may not change now, with the reason (the autopilot's opt-in, cool-down, budget)."""


@dataclass
class Slot:
    node: DemandNode
    reported: ReportedNode | None
    strategy: MigStrategy
    bound: dict[str, DemandPod]
    """The GPU pods on it, by name."""
    free_now: dict[str, int]
    not_changed: str
    layout: LayoutFile
    offers: dict[str, frozenset[str]] | None = None
    """Per layout it may change to, what that layout's GPUs would advertise."""
    candidates: dict[str, Candidate] = field(default_factory=dict)
    queues: list[Queue] = field(default_factory=list)
    own: list[int] = field(default_factory=list)
    """Pending pods step 1 placed here."""

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


def _slot(node: DemandNode, bound: dict[str, DemandPod], view: DemandView, options: AdviseOptions) -> Slot:
    reported, why = read_reported(node)
    if not why and node.name in options.frozen:
        why = options.frozen[node.name]
    strategy = options.strategy or infer_strategy(node.view, reported)
    if not why and strategy is MigStrategy.NONE:
        why = "its device plugin ignores MIG (strategy none): no layout changes what it offers"
    capacity = {name: count for name, count in node.view.allocatable.items() if is_gpu_resource(name)}
    return Slot(node, reported, strategy, bound, free(capacity, bound.values()), why, view.layout)


@dataclass
class _Option:
    """A change a slot may make in this step; its key as priced in round `at`, a bound of it since."""

    position: int
    candidate: Candidate
    key: Key | None = None
    """None: it serves none of the pods waiting (for good)."""
    at: int = -1
    placed: list[int] = field(default_factory=list)
    pricing: int = -1


def _negated(rest: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(_negated(r) if isinstance(r, tuple) else -cast(int, r) for r in rest)


def _fits(requests: Requests, left: Mapping[str, int]) -> bool:
    return all(left.get(resource, 0) >= count for resource, count in requests)


class _Search:
    def __init__(self, view: DemandView, options: AdviseOptions, cache: CandidateCache | None) -> None:
        self.view, self.options, self.cache = view, options, cache
        self.pending = pending_order(view.pods)
        self.names = [p.name for p in self.pending]
        self.requests: list[Requests] = [tuple(sorted(p.requests.items())) for p in self.pending]
        self.levels = sorted({p.priority for p in self.pending}, reverse=True)
        self.level = [self.levels.index(p.priority) for p in self.pending]
        named = [(p.name, p) for p in view.pods]
        self.pod_labels = {name: dict(p.labels) for name, p in named}
        bound: dict[str, dict[str, DemandPod]] = {}
        for name, pod in named:
            if pod.node_name and not pod.finished:
                bound.setdefault(pod.node_name, {})[name] = pod
        self.slots = [_slot(n, bound.get(n.name, {}), view, options) for n in sorted(view.nodes, key=lambda n: n.name)]
        self.assigned: list[int | None] = [None] * len(self.pending)
        self.changed: dict[str, Candidate] = {}
        self.generated: dict[str, dict[int, dict[str, int]]] = {}
        self.drawn: dict[str, int] = {}
        """Evictions per PodDisruptionBudget of the changes made."""
        groups: dict[tuple[object, ...], int] = {}
        self.group = [groups.setdefault((tuple(sorted(p.node_selector.items())), p.affinity, p.tolerations),
                                        len(groups)) for p in self.pending]
        first = {g: self.pending[i] for i, g in reversed(list(enumerate(self.group)))}
        self._by_label: dict[tuple[str, str], list[int]] = {}
        for i, slot in enumerate(self.slots):
            for label in (("metadata.name", slot.name), *slot.node.view.labels.items()):
                self._by_label.setdefault(label, []).append(i)
        self.eligible = [self._may_run_on(first[g]) for g in range(len(groups))]
        self.queues: dict[Queue, list[int]] = {}
        """The pending pods not placed, per group and request, in order."""
        self._heap: list[tuple[Key, int, int]] = []
        self._live: list[int] = []
        """The serial of each slot's entry in the heap."""
        self._options: list[list[_Option]] = []
        self._now = 0
        self._serials = itertools.count()
        self._watched: dict[int, list[tuple[int, int, int, bool]]] = {}
        """Pod -> (slot, pricing, option's position, mixed: to price again at once) of what serves it."""
        self._offers: dict[tuple[object, ...], dict[str, frozenset[str]]] = {}
        self._fitting: dict[tuple[int, str], list[Queue]] = {}
        self._draws: dict[tuple[str, str], Counter[str]] = {}
        self._reasons: dict[tuple[int, Requests, int], str] = {}

    @property
    def generating(self) -> bool:
        return self.options.generate

    def _may_run_on(self, pod: DemandPod) -> list[int]:
        """The slots `pod` may run on: those one label of its selector, or an `In` of each affinity term,
        names (looked up), each then checked as the scheduler would."""
        named: set[int] | None = None
        if pod.node_selector:
            named = set(self._by_label.get(min(pod.node_selector.items()), ()))
        for term in pod.affinity if named is None else ():
            requirement = next((r for r in (*term.expressions, *term.fields) if r.operator == "In"), None)
            if requirement is None:
                named = None
                break
            key = requirement.key if requirement in term.expressions else "metadata.name"
            named = (named or set()).union(*(self._by_label.get((key, v), ()) for v in requirement.values))
        return [i for i in (sorted(named) if named is not None else range(len(self.slots)))
                if self.slots[i].may_run(pod) is None]

    def place_now(self) -> None:
        """Each pending pod that fits now, to the node where it leaves the fewest units free (then by name)."""
        for index, requests in enumerate(self.requests):
            queue = self.queues.setdefault((self.group[index], requests), [])
            fitting = [] if queue else [  # what is free only shrinks: once one alike waits, so do the next
                (sum(f.get(r, 0) - n for r, n in requests), i) for i in self.eligible[self.group[index]]
                if _fits(requests, f := self.slots[i].free_now)]
            if not fitting:
                queue.append(index)
                continue
            slot = self.slots[found := min(fitting)[1]]
            for resource, count in requests:
                slot.free_now[resource] -= count
            self.assigned[index] = found
            slot.own.append(index)
        for group, requests in self.queues:
            for i in self.eligible[group]:
                self.slots[i].queues.append((group, requests))

    def score(self, pods: Iterable[int]) -> list[int]:
        counts = [0] * len(self.levels)
        for index in pods:
            counts[self.level[index]] += 1
        return counts

    def layout_names(self, slot: Slot) -> list[str]:
        """The layouts the node may change to (the file's that resolve on its GPUs, and with --generate its
        own), not its current one."""
        if slot.reported is None:
            return []
        if slot.offers is None:
            if self.options.generate and slot.strategy is MigStrategy.MIXED:
                slot.layout = self._with_generated(slot)
            kind = (tuple((g.index, g.pci_device_id, g.pci_subsystem_id, g.mig_capable)
                          for g in slot.reported.observation.gpus), slot.node.layout, slot.strategy, id(slot.layout))
            if kind not in self._offers:  # nodes of one kind in one layout offer alike
                self._offers[kind] = {n: o for n in slot.layout.names if n != slot.node.layout
                                      and (o := offered(slot.reported, slot.layout, n, slot.strategy)) is not None}
            slot.offers = self._offers[kind]
        return list(slot.offers)

    def candidate(self, slot: Slot, name: str) -> Candidate:
        if name not in slot.candidates:
            slot.candidates[name] = self._evaluate(slot, name)
        return slot.candidates[name]

    def candidates_of(self, slot: Slot) -> list[Candidate]:
        return [self.candidate(slot, name) for name in self.layout_names(slot)]

    def _evaluate(self, slot: Slot, name: str) -> Candidate:
        assert slot.reported is not None
        key = (slot.name, slot.node.view.annotations.get(OBSERVED_ANNOTATION), slot.layout.configs[name], name,
               slot.strategy, tuple((n, p.priority, p.owner_kinds, p.finished) for n, p in slot.bound.items()))
        if self.cache is None or key not in self.cache:
            found = evaluate(slot.node, slot.reported, slot.layout, name, strategy=slot.strategy, bound=slot.bound)
            if self.cache is None:
                return found
            self.cache[key] = found
        return self.cache[key]

    def _with_generated(self, slot: Slot) -> LayoutFile:
        assert slot.reported is not None
        mine = {group for group, _ in slot.queues}
        demand = [(r, p.priority) for index, p in enumerate(self.pending) if self.group[index] in mine
                  for r, n in p.requests.items() for _ in range(n)]
        changes = generate_node(slot.reported, demand)
        if not changes:
            return slot.layout
        name = config_name(changes)
        self.generated[name] = changes
        return LayoutFile(slot.layout.path, {**slot.layout.configs, **generated_layout(name, changes).configs})

    # --- steps 2 and 3 --------------------------------------------------------------------------------

    def change(self, *, allow_evictions: bool) -> None:
        """Changes, best first, until none serves one more pod (see the module's docstring): the heap holds
        each slot's largest key, exact if priced in this round (`now`), else a bound."""
        self._heap, self._live, self._watched, self._now = [], [-1] * len(self.slots), {}, 0
        self._options = [[] for _ in self.slots]
        for first in self._open(range(len(self.slots))):
            self._price(first, allow_evictions=allow_evictions)
        while (i := self._pop()) is not None:
            option = self._best(i)
            if option is None or self.slots[i].name in self.changed:
                continue
            if option.at != self._now:  # a bound: what it is worth now
                self._price_option(i, option)
                self._push(i)
                continue
            eager, raised = self._change(i, option)
            self._now += 1
            for j in self._open(sorted(eager)):
                self._price(j, allow_evictions=allow_evictions)
            for j in self._open(sorted(set(raised) - eager)):
                for position, more in raised[j].items():
                    key = cast(Key, self._options[j][position].key)
                    self._options[j][position].key = [a + b for a, b in zip(key[0], more, strict=True)], key[1]
                self._push(j)

    def _best(self, i: int) -> _Option | None:
        """The slot's first option of the largest key that serves more pods."""
        found: tuple[Key, _Option] | None = None
        for option in self._options[i]:
            if (key := option.key) and key[0] > [0] * len(key[0]) and (found is None or key > found[0]):
                found = key, option
        return found[1] if found else None

    def _push(self, i: int) -> None:
        self._live[i] = serial = next(self._serials)
        if (option := self._best(i)) is not None and option.key:
            heapq.heappush(self._heap, (([-g for g in option.key[0]], _negated(option.key[1])), i, serial))

    def _pop(self) -> int | None:
        while self._heap:
            _, i, serial = heapq.heappop(self._heap)
            if serial == self._live[i]:  # older entries of the slot are dropped
                return i
        return None

    def _open(self, slots: Iterable[int]) -> Iterable[int]:
        return (i for i in slots if not self.slots[i].not_changed and self.slots[i].name not in self.changed)

    def _price(self, i: int, *, allow_evictions: bool) -> None:
        """Every option of the slot priced now, in layout order."""
        slot = self.slots[i]
        self._options[i] = []
        for name in self.layout_names(slot) if self._wanted(slot) else ():  # none: all that may run here is placed
            candidate = self.candidate(slot, name)
            if not (candidate.problem or not candidate.impact.changes or (candidate.evictions and not allow_evictions)):
                self._options[i].append(option := _Option(len(self._options[i]), candidate))
                self._price_option(i, option)
        self._push(i)

    def _wanted(self, slot: Slot) -> set[str]:
        return {r for key in slot.queues if self.queues[key] for r, _ in key[1]}

    def _price_option(self, i: int, option: _Option) -> None:
        slot, candidate = self.slots[i], option.candidate
        assert slot.offers is not None
        option.at, option.pricing, option.key = self._now, next(self._serials), None
        if not slot.offers[candidate.layout] & self._wanted(slot):
            return  # it creates nothing a waiting pod asks for
        option.placed, mixed = self._fill(slot, i, candidate)
        gain = [a - b for a, b in zip(self.score(option.placed), self.score(slot.own), strict=True)]
        if gain > [0] * len(gain) and candidate.evictions and self.overdraws(candidate):
            return  # and for good: the changes made only draw more
        impact = candidate.impact
        option.key = gain, (-candidate.evictions, tuple(-p for p in candidate.victims), -len(impact.gpus_changed),
                            -impact.gis_destroyed, -impact.gis_created)
        for index in option.placed:  # what taking it may raise
            if self.assigned[index] is None and (mixed or sum(n for _, n in self.requests[index]) > 1):
                self._watched.setdefault(index, []).append((i, option.pricing, option.position, mixed))

    def _fill(self, slot: Slot, i: int, candidate: Candidate) -> tuple[list[int], bool]:
        """The pods of the slot's pool (its own, then those waiting that may run here, merged in order) whose
        whole request fits what the change leaves, of priority above what it evicts (the oracle's `fill`);
        and whether a pod asking two profiles is served, or among the first that could use some resource (as
        many as it has units): then taking pods away may raise what the change serves by more than a bound
        says. Pods of one queue ask alike: once one does not fit, none of the rest does."""
        left = dict(candidate.free)
        if (i, candidate.layout) not in self._fitting:
            self._fitting[(i, candidate.layout)] = [key for key in slot.queues if _fits(key[1], left)]
        units, seen = dict(left), dict.fromkeys(left, 0)
        sources = [([j for j in slot.own if _fits(self.requests[j], left)], False)]
        sources += [(queue, True) for key in self._fitting[(i, candidate.layout)] if (queue := self.queues[key])]
        heads = [(pods[0], n, 0) for n, (pods, _) in enumerate(sources) if pods]
        heapq.heapify(heads)
        placed: list[int] = []
        mixed = False
        while heads and any(left.values()):
            index, n, at = heapq.heappop(heads)
            if self.pending[index].priority <= candidate.floor:
                break
            requests = self.requests[index]
            mixed |= len(requests) > 1 and any(seen[r] < units[r] for r, _ in requests)
            for resource, _ in requests:
                seen[resource] += 1
            if _fits(requests, left):
                for resource, count in requests:
                    left[resource] -= count
                placed.append(index)
                mixed |= len(requests) > 1
            elif sources[n][1]:
                continue
            if at + 1 < len(sources[n][0]):
                heapq.heappush(heads, (sources[n][0][at + 1], n, at + 1))
        return placed, mixed

    def overdraws(self, candidate: Candidate) -> str:
        """The PodDisruptionBudgets `candidate` would overdraw beside the changes made, said ("": none)."""
        return "; ".join(pdb_overdrawn(Counter(self.drawn) + self._drawn(candidate), self.view.budgets))

    def _drawn(self, candidate: Candidate) -> Counter[str]:
        key = (candidate.node, candidate.layout)
        if key not in self._draws:
            self._draws[key] = Counter(pdb_draws([candidate.impact], self.view.budgets, self.pod_labels))
        return self._draws[key]

    def _change(self, i: int, option: _Option) -> tuple[set[int], dict[int, dict[int, list[int]]]]:
        """Slot i makes `option`. Returns the slots to price again at once (those a pod given back may run on,
        or whose option served a pod taken beside one asking two profiles), and how much, per priority
        level, taking pods asking several devices may raise the others' options."""
        slot = self.slots[i]
        self.changed[slot.name] = option.candidate
        self.drawn = dict(Counter(self.drawn) + self._drawn(option.candidate))
        eager: set[int] = set()
        raised: dict[int, dict[int, list[int]]] = {}
        for index in set(slot.own) - set(option.placed):  # placed now, but not by the change: waiting again
            self.assigned[index] = None
            bisect.insort(self.queues[(self.group[index], self.requests[index])], index)
            eager.update(self.eligible[self.group[index]])
        for index in option.placed:
            if self.assigned[index] is None:
                queue = self.queues[(self.group[index], self.requests[index])]
                del queue[bisect.bisect_left(queue, index)]
                for j, pricing, position, mixed in self._watched.pop(index, ()):
                    if position < len(self._options[j]) and self._options[j][position].pricing == pricing:
                        if mixed:
                            eager.add(j)
                        else:
                            more = raised.setdefault(j, {}).setdefault(position, [0] * len(self.levels))
                            more[self.level[index]] += sum(n for _, n in self.requests[index]) - 1
            self.assigned[index] = i
        return eager, raised

    # --- the result -----------------------------------------------------------------------------------

    def result(self) -> Advice:
        serves: dict[int, list[str]] = {}
        for index, i in enumerate(self.assigned):
            if i is not None:
                serves.setdefault(i, []).append(self.names[index])
        nodes = tuple(
            NodeAdvice(
                node=s.name, layout=s.node.layout,
                target=self.changed[s.name].layout if s.name in self.changed else None,
                impact=self.changed[s.name].impact if s.name in self.changed else None,
                serves=tuple(serves.get(i, ())), not_changed=s.not_changed,
            )
            for i, s in enumerate(self.slots)
        )
        pods = tuple(
            PodAdvice(
                pod=self.names[index], priority=p.priority, requests=dict(p.requests),
                node=None if (i := self.assigned[index]) is None else self.slots[i].name,
                after_change=i is not None and self.slots[i].name in self.changed,
                reason="" if i is not None else self._reason(index),
                waited_s=max(0.0, self.view.now - p.created) if self.view.now else 0.0,
            )
            for index, p in enumerate(self.pending)
        )
        used = {c.layout for c in self.changed.values()}
        chosen = {name: changes for name, changes in self.generated.items() if name in used}
        return Advice(nodes=nodes, pods=pods, generated=layout_document(chosen) if chosen else None)

    def _reason(self, index: int) -> str:
        """Why pod `index` waits: the same for every pod of its group, request and priority."""
        key = (self.group[index], self.requests[index], self.pending[index].priority)
        if key not in self._reasons:
            self._reasons[key] = explain(self, self.pending[index], [self.slots[i] for i in self.eligible[key[0]]])
        return self._reasons[key]


def advise(view: DemandView, options: AdviseOptions | None = None, *, cache: CandidateCache | None = None) -> Advice:
    """The advice for `view` (see the module's docstring); `cache` keeps candidate prices between calls."""
    search = _Search(view, options or AdviseOptions(), cache)
    search.place_now()
    search.change(allow_evictions=False)
    search.change(allow_evictions=True)
    return search.result()
