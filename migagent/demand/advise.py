"""The advice: which nodes to change to which layout so that the most pending pods can run, for the
fewest evictions and GPUs changed.

    pending pods, highest priority first, then longest waiting
    -> 1. each one that fits now (free devices on a node it may run on) is placed there, best fit
    -> 2. changes that evict nothing: repeatedly, the (node, layout) serving the most pods still
          waiting (counted per priority level, highest first), then evicting fewest, changing fewest
          GPUs, destroying fewest GIs; until no change serves one more pod
    -> 3. the same, now allowing changes that evict: capacity in use is reclaimed only for pods
          step 2 could not serve, and only from pods of strictly lower priority than every pod the
          change serves; the evictions of all changes together stay within every PodDisruptionBudget
    -> what is still waiting gets its reason

Equal priority never evicts: that would swap one waiting pod for another and cost a restart. A node
is changed only when its agent has reported and settled (nodes.read_reported); a change that would
evict a pod no drain can move (DaemonSet, static, controller-less) is never proposed. Each node is
changed at most once per advice. Non-GPU resources (CPU, memory) are the scheduler's to judge.

At fleet scale (thousands of nodes, tens of thousands of pods) the rounds of steps 2 and 3 pick what
re-pricing every node each round would pick, without doing it. Pods alike to the scheduler (selector,
affinity, tolerations) share the list of nodes they may run on, and wait in one queue per such group
and request; a node's pods are those queues merged. A node's best change is kept in a heap and priced
again only when it comes out on top after another node changed: taking pods away can only lower its
value while the pods its change serves first are single devices. When a change served a pod that
asks for more (two devices, two profiles), taking that pod can raise the value, so such a node is
priced again at once. The oracle the tests hold (tests/unit/demand/oracle.py) re-prices every node.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from migagent.demand.advice import Advice, NodeAdvice, PodAdvice
from migagent.demand.candidates import Candidate, evaluate, leaves_gpus, offered
from migagent.demand.explain import explain
from migagent.demand.generate import config_name, generate_node, generated_layout, layout_document
from migagent.demand.nodes import free, infer_strategy, read_reported
from migagent.layout.spec import LayoutFile
from migagent.layout.strategy import MigStrategy
from migagent.node.names import OBSERVED_ANNOTATION, is_gpu_resource
from migagent.node.scheduling import DemandNode, DemandPod, is_mig_demand
from migagent.rollout.budget import DisruptionBudget, pdb_draws, pdb_overdrawn
from migagent.rollout.impact import capacity_now
from migagent.rollout.reported import ReportedNode

CandidateCache = MutableMapping[tuple[object, ...], Candidate]
Requests = tuple[tuple[str, int], ...]
Queue = tuple[int, Requests]
"""Pending pods of one group (nodes they may run on) asking one request."""
Key = tuple[list[int], tuple[object, ...]]
"""What the oracle compares, largest first: the pods served per priority level (highest first) beyond
those placed there now; then, negated: evictions, the evicted pods' priorities (highest first: as many
evicted, the lowest priorities go), GPUs changed, GIs destroyed, GIs created."""


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
    partial: frozenset[str] = frozenset()
    """The layouts among those that leave some GPU as it is."""
    candidates: dict[str, Candidate] = field(default_factory=dict)
    queues: list[Queue] = field(default_factory=list)
    """The queues of pods that may run here (group, request)."""
    own: list[int] = field(default_factory=list)
    """Pending pods placed here by step 1 (their indices)."""
    key: tuple[object, ...] = ()
    """What its prices depend on besides the layout (for the autopilot's cache between looks)."""

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


def _group_key(pod: DemandPod) -> tuple[object, ...]:
    """What the scheduler filters a pod by: pods with the same key may run on the same nodes."""
    return tuple(sorted(pod.node_selector.items())), pod.affinity, pod.tolerations


def _single(requests: Requests) -> bool:
    return len(requests) == 1 and requests[0][1] == 1


@dataclass
class _Fill:
    placed: list[int]
    mixed: bool
    """A pod asking two profiles is among the first pods that could use some resource (as many as it has
    units), or is served. Otherwise taking pods away can raise the change's value only by what the pods
    taken that ask several devices of one profile leave room for: each asking k, at most k - 1 pods more
    at its priority or below (checked by tests/unit/demand/test_advise_differential.py against the oracle);
    with a pod asking two profiles there, by more."""


@dataclass
class _Option:
    """One change a slot may make in this step: its key when priced in round `at`, a bound of it since."""

    position: int
    candidate: Candidate
    key: Key | None = None
    """None: it serves none of the pods waiting (for good)."""
    at: int = -1
    placed: list[int] = field(default_factory=list)
    pricing: int = -1
    """Which pricing gave the key (the pods it serves are watched under it)."""


def _negated(rest: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(_negated(r) if isinstance(r, tuple) else -cast(int, r) for r in rest)


class _Rounds:
    """The heap of steps 2 and 3: per slot its largest key, exact when priced in this round, else a bound."""

    def __init__(self, slots: int) -> None:
        self.heap: list[tuple[Key, int, int]] = []
        self.live = [-1] * slots
        """The serial of each slot's entry in the heap (older entries are dropped when met)."""
        self.options: list[list[_Option]] = [[] for _ in range(slots)]
        self.now = 0
        self._serials = itertools.count()

    def best(self, i: int) -> _Option | None:
        """The slot's first option of the largest key that serves more pods."""
        found = None
        for option in self.options[i]:
            if option.key is not None and option.key[0] > [0] * len(option.key[0]) and (
                    found is None or option.key > cast(Key, found.key)):
                found = option
        return found

    def push(self, i: int) -> None:
        self.live[i] = serial = next(self._serials)
        if (option := self.best(i)) is not None:
            key = cast(Key, option.key)
            heapq.heappush(self.heap, (([-g for g in key[0]], _negated(key[1])), i, serial))

    def pop(self) -> int | None:
        """The slot of the largest key, skipping entries replaced since."""
        while self.heap:
            _, i, serial = heapq.heappop(self.heap)
            if serial == self.live[i]:
                return i
        return None


class _Search:
    def __init__(self, view: DemandView, options: AdviseOptions, cache: CandidateCache | None) -> None:
        self.view = view
        self.options = options
        self.cache = cache
        self.pending = pending_order(view.pods)
        self.requests: list[Requests] = [tuple(sorted(p.requests.items())) for p in self.pending]
        self.levels = sorted({p.priority for p in self.pending}, reverse=True)
        level = {priority: index for index, priority in enumerate(self.levels)}
        self.level = [level[p.priority] for p in self.pending]
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
        """Evictions per PodDisruptionBudget of the changes made so far."""
        self._drawn_by: dict[tuple[str, str], dict[str, int]] = {}
        self._now: dict[str, frozenset[str]] = {}
        self.groups: dict[tuple[object, ...], int] = {}
        self.group = [self.groups.setdefault(_group_key(p), len(self.groups)) for p in self.pending]
        self.names = [p.name for p in self.pending]
        self._index: dict[tuple[str, str, bool], list[int]] = {}
        first = {g: i for i, g in reversed(list(enumerate(self.group)))}
        self.eligible = [self._may_run_on(self.pending[first[g]]) for g in range(len(self.groups))]
        """Per group, the slots its pods may run on."""
        self.queues: dict[Queue, list[int]] = {}
        """Pending pods not placed, per (group, request), in order."""
        self._reasons: dict[tuple[int, Requests, int], str] = {}
        self._offers: dict[tuple[object, ...], tuple[dict[str, frozenset[str]], frozenset[str]]] = {}
        self._watched: dict[int, list[tuple[int, int, int, bool]]] = {}
        """Pod -> (slot, pricing, option's position, mixed) of the options serving it, where taking it may raise
        their value (mixed: by how much, only pricing again says; see `_Fill`)."""
        self._pricings = itertools.count()
        self._fitting: dict[tuple[int, str], tuple[list[Queue], dict[str, tuple[Queue, ...]]]] = {}
        """Per (slot, layout): the queues whose pods fit the change, all and by resource."""
        self._filled: dict[tuple[object, ...], list[int]] = {}
        """One resource filled, for the nodes alike (emptied by each change: the queues moved)."""

    @property
    def generating(self) -> bool:
        return self.options.generate

    def _may_run_on(self, pod: DemandPod) -> list[int]:
        """The slots `pod` may run on: those a label of its selector, or an `In` of each affinity term,
        could name (looked up, not scanned), then each checked as the scheduler would."""
        if not self._index:
            for i, slot in enumerate(self.slots):
                self._index.setdefault(("metadata.name", slot.name, True), []).append(i)
                for key, value in slot.node.view.labels.items():
                    self._index.setdefault((key, value, False), []).append(i)
        narrowed: set[int] | None = None
        for key, value in sorted(pod.node_selector.items())[:1]:
            narrowed = set(self._index.get((key, value, False), ()))
        for term in pod.affinity if narrowed is None else ():
            named = [(r, field) for field, rs in ((False, term.expressions), (True, term.fields)) for r in rs
                     if r.operator == "In"]
            if not named:
                narrowed = None
                break
            (requirement, by_field), found = named[0], narrowed or set()
            narrowed = found.union(*(self._index.get((requirement.key, v, by_field), ()) for v in requirement.values))
        candidates = sorted(narrowed) if narrowed is not None else range(len(self.slots))
        return [i for i in candidates if self.slots[i].may_run(pod) is None]

    # --- step 1 ---------------------------------------------------------------------------------------

    def place_now(self) -> None:
        """Each pending pod that fits now, to the node where it leaves the fewest units free (then by name)."""
        buckets: dict[tuple[int, str], dict[int, list[int]]] = {}
        """(group, resource) -> units free -> the slots of the group with that many (a heap of indices)."""
        holders: dict[tuple[int, str], list[dict[int, list[int]]]] = {}
        full: set[Queue] = set()
        for index, requests in enumerate(self.requests):
            group = self.group[index]
            self.queues.setdefault((group, requests), [])
            if (group, requests) in full:
                found = None
            elif len(requests) == 1:
                found = self._fewest_left(buckets, holders, group, *requests[0])
            else:
                fitting = [(sum(f.get(r, 0) - n for r, n in requests), i) for i in self.eligible[group]
                           if self._fits(requests, f := self.slots[i].free_now)]
                found = min(fitting)[1] if fitting else None
            if found is None:
                full.add((group, requests))  # what is free only shrinks: the next pod alike fits nowhere either
                self.queues[(group, requests)].append(index)
                continue
            for resource, count in requests:
                units = self.slots[found].free_now[resource] = self.slots[found].free_now[resource] - count
                for by_units in holders.get((found, resource), ()) if units else ():
                    heapq.heappush(by_units.setdefault(units, []), found)
            self.assigned[index] = found
            self.slots[found].own.append(index)
        for group, requests in self.queues:
            for i in self.eligible[group]:
                self.slots[i].queues.append((group, requests))

    def _fewest_left(self, buckets: dict[tuple[int, str], dict[int, list[int]]],
                     holders: dict[tuple[int, str], list[dict[int, list[int]]]], group: int, resource: str,
                     count: int) -> int | None:
        """The slot of `group` with the fewest units of `resource` free, at least `count`, then the first by
        name. A slot whose units fall is added to the bucket of its new count; the stale entry is dropped
        when met."""
        by_units = buckets.get((group, resource))
        if by_units is None:
            by_units = buckets[(group, resource)] = {}
            for i in self.eligible[group]:
                holders.setdefault((i, resource), []).append(by_units)
                if units := self.slots[i].free_now.get(resource, 0):
                    by_units.setdefault(units, []).append(i)
        for units in sorted(u for u in by_units if u >= count):
            heap = by_units[units]
            while heap and self.slots[heap[0]].free_now.get(resource, 0) != units:
                heapq.heappop(heap)
            if heap:
                return heap[0]
        return None

    # --- steps 2 and 3 --------------------------------------------------------------------------------

    def score(self, pods: Iterable[int]) -> tuple[int, ...]:
        counts = [0] * len(self.levels)
        for index in pods:
            counts[self.level[index]] += 1
        return tuple(counts)

    def layout_names(self, slot: Slot) -> list[str]:
        """The layouts the node may change to (the file's that resolve on its GPUs, and with --generate its
        own), not its current one."""
        if slot.reported is None:
            return []
        if slot.offers is None:
            if self.options.generate and slot.strategy is MigStrategy.MIXED:
                slot.layout = self._with_generated(slot)
            gpus = tuple((g.index, g.pci_device_id, g.pci_subsystem_id, g.mig_capable)
                         for g in slot.reported.observation.gpus)
            kind = (gpus, slot.node.layout, slot.strategy, id(slot.layout))
            if kind not in self._offers:  # nodes of one kind in one layout offer alike
                offers = {n: o for n in slot.layout.names if n != slot.node.layout
                          and (o := offered(slot.reported, slot.layout, n, slot.strategy)) is not None}
                self._offers[kind] = offers, frozenset(
                    n for n in offers if leaves_gpus(slot.reported, slot.layout, n, slot.strategy))
            slot.offers, slot.partial = self._offers[kind]
        return list(slot.offers)

    def candidate(self, slot: Slot, name: str) -> Candidate:
        if name not in slot.candidates:
            slot.candidates[name] = self._evaluate(slot, name)
        return slot.candidates[name]

    def candidates_of(self, slot: Slot, asks: Collection[str] = ()) -> list[Candidate]:
        """Its candidates; with `asks`, only those whose capacity may hold all of them: under the mixed
        strategy a resource neither its GPUs advertise now nor the layout's would is not there."""
        names = self.layout_names(slot)
        if asks and slot.strategy is MigStrategy.MIXED and slot.offers is not None and slot.reported is not None:
            if slot.name not in self._now:
                self._now[slot.name] = frozenset(capacity_now(slot.reported))
            now, offers, partial = self._now[slot.name], slot.offers, slot.partial
            names = [n for n in names if all(r in offers[n] or (r in now and n in partial) for r in asks)]
        return [self.candidate(slot, name) for name in names]

    def _evaluate(self, slot: Slot, name: str) -> Candidate:
        assert slot.reported is not None
        if self.cache is None:
            return evaluate(slot.node, slot.reported, slot.layout, name, strategy=slot.strategy, bound=slot.bound)
        slot.key = slot.key or (slot.name, slot.node.view.annotations.get(OBSERVED_ANNOTATION), slot.strategy,
                                tuple((n, p.priority, p.owner_kinds, p.finished) for n, p in slot.bound.items()))
        key = (*slot.key, slot.layout.configs[name], name)
        if key not in self.cache:
            self.cache[key] = evaluate(slot.node, slot.reported, slot.layout, name, strategy=slot.strategy,
                                       bound=slot.bound)
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

    def change(self, *, allow_evictions: bool) -> None:
        """Changes, best first, until none serves one more pod. Each slot's best option sits in a heap with
        its key (what the oracle compares: it breaks ties by slot, then layout, as the heap does); a key
        priced before the last change is an upper bound of the option's value now (see `_Fill`), priced
        again when it comes out on top; a key priced since is the best there is."""
        rounds = _Rounds(len(self.slots))
        self._watched.clear()
        for i in self._open(range(len(self.slots))):
            self._price(rounds, i, allow_evictions=allow_evictions)
        while (i := rounds.pop()) is not None:
            option = rounds.best(i)
            if option is None or self.slots[i].name in self.changed:
                continue
            if option.at != rounds.now:
                self._price_option(rounds, i, option)
                rounds.push(i)
                continue
            eager, raised = self._change(rounds, i, option.candidate, option.placed)
            rounds.now += 1
            for j in self._open(sorted(eager)):
                self._price(rounds, j, allow_evictions=allow_evictions)
            for j in self._open(sorted(set(raised) - eager)):
                for position, more in raised[j].items():
                    key = cast(Key, rounds.options[j][position].key)
                    rounds.options[j][position].key = [a + b for a, b in zip(key[0], more, strict=True)], key[1]
                rounds.push(j)

    def _open(self, slots: Iterable[int]) -> Iterable[int]:
        return (i for i in slots if not self.slots[i].not_changed and self.slots[i].name not in self.changed)

    def _price(self, rounds: _Rounds, i: int, *, allow_evictions: bool) -> None:
        """Every option of the slot priced now, in layout order."""
        slot = self.slots[i]
        rounds.options[i] = []
        for name in self.layout_names(slot) if self._wanted(slot) else ():  # none: all that may run here is placed
            candidate = self.candidate(slot, name)
            if candidate.problem or not candidate.impact.changes or (candidate.evictions and not allow_evictions):
                continue
            option = _Option(len(rounds.options[i]), candidate)
            rounds.options[i].append(option)
            self._price_option(rounds, i, option)
        rounds.push(i)

    def _wanted(self, slot: Slot) -> set[str]:
        """The resources pods still waiting that may run on the slot ask for."""
        return {r for key in slot.queues if self.queues[key] for r, _ in key[1]}

    def _price_option(self, rounds: _Rounds, i: int, option: _Option) -> None:
        slot, candidate = self.slots[i], option.candidate
        assert slot.offers is not None
        option.at, option.pricing, option.key = rounds.now, next(self._pricings), None
        if not slot.offers[candidate.layout] & self._wanted(slot):
            return  # it creates nothing a waiting pod asks for
        filled = self._fill(i, candidate.layout, candidate)
        gain = [a - b for a, b in zip(self.score(filled.placed), self.score(slot.own), strict=True)]
        if gain > [0] * len(gain) and candidate.evictions and self.overdraws(candidate):
            return  # and for good: the changes made only draw more
        impact = candidate.impact
        option.key = gain, (-candidate.evictions, tuple(-p for p in candidate.victims), -len(impact.gpus_changed),
                            -impact.gis_destroyed, -impact.gis_created)
        option.placed = filled.placed
        for index in filled.placed:  # watch what taking it may raise (see `_Fill`)
            if self.assigned[index] is None and (filled.mixed or sum(n for _, n in self.requests[index]) > 1):
                self._watched.setdefault(index, []).append((i, option.pricing, option.position, filled.mixed))

    def _fill(self, i: int, name: str, candidate: Candidate) -> _Fill:
        """The pods of the slot's pool (its own, and those waiting that may run here), in order, whose whole
        request fits what the change leaves, of priority above what it evicts (the oracle's `fill`). When
        each asks one resource, each resource fills on its own: alike for nodes alike, worked out once
        between two changes."""
        slot = self.slots[i]
        if (i, name) not in self._fitting:
            fitting = [key for key in slot.queues if self._fits(key[1], candidate.free)]
            by_resource = {r: tuple(k for k in fitting if k[1][0][0] == r) for r in candidate.free}
            self._fitting[(i, name)] = fitting, by_resource
        fitting, by_resource = self._fitting[(i, name)]
        own = [j for j in slot.own if self._fits(self.requests[j], candidate.free)]
        if any(len(key[1]) > 1 for key in fitting) or any(len(self.requests[j]) > 1 for j in own):
            return self._merged(candidate.free, candidate.floor, own, fitting)
        placed: list[int] = []
        for resource, units in candidate.free.items():
            mine = tuple(j for j in own if self.requests[j][0][0] == resource)
            memo = (resource, units, candidate.floor, by_resource[resource], mine)
            if units and (mine or by_resource[resource]):
                if memo not in self._filled:
                    self._filled[memo] = self._merged({resource: units}, candidate.floor, mine, memo[3]).placed
                placed += self._filled[memo]
        return _Fill(placed, mixed=False)

    def _merged(self, free: Mapping[str, int], floor: int, own: Sequence[int],
                fitting: Iterable[Queue]) -> _Fill:
        """`_fill` over the slot's pods merged in order. Pods of one queue ask alike: once one does not fit,
        none of the rest does."""
        left = dict(free)
        units, seen = dict(left), dict.fromkeys(left, 0)
        sources = [(own, False), *((queue, True) for key in fitting if (queue := self.queues[key]))]
        heads = [(pods[0], n, 0) for n, (pods, _) in enumerate(sources) if pods]
        heapq.heapify(heads)
        filled = _Fill([], mixed=False)
        while heads and any(left.values()):
            index, n, at = heapq.heappop(heads)
            if self.pending[index].priority <= floor:
                break
            requests = self.requests[index]
            if len(requests) > 1:
                filled.mixed |= any(seen[r] < units[r] for r, _ in requests)
            for resource, _ in requests:
                seen[resource] += 1
            pods, alike = sources[n]
            if self._fits(requests, left):
                for resource, count in requests:
                    left[resource] -= count
                filled.placed.append(index)
                filled.mixed |= len(requests) > 1
            elif alike:
                continue
            if at + 1 < len(pods):
                heapq.heappush(heads, (pods[at + 1], n, at + 1))
        return filled

    def overdraws(self, candidate: Candidate) -> str:
        """Which PodDisruptionBudgets `candidate` would overdraw beside the changes made, said ("": none)."""
        return "; ".join(pdb_overdrawn(Counter(self.drawn) + Counter(self._draws(candidate)), self.view.budgets))

    def _draws(self, candidate: Candidate) -> dict[str, int]:
        """Its evictions per PodDisruptionBudget."""
        key = (candidate.node, candidate.layout)
        if key not in self._drawn_by:
            self._drawn_by[key] = pdb_draws([candidate.impact], self.view.budgets, self.pod_labels)
        return self._drawn_by[key]

    @staticmethod
    def _fits(requests: Requests, left: Mapping[str, int]) -> bool:
        return all(left.get(resource, 0) >= count for resource, count in requests)

    def _change(self, rounds: _Rounds, i: int, candidate: Candidate, placed: list[int]
                ) -> tuple[set[int], dict[int, dict[int, list[int]]]]:
        """Slot i changes to `candidate` and serves `placed`. Returns the slots to price again at once (those a
        pod given back may run on, or whose change served a taken pod beside one asking two profiles), and by
        how much, per priority level, taking pods asking several devices may raise others' changes."""
        slot = self.slots[i]
        self.changed[slot.name] = candidate
        self._filled.clear()
        self.drawn = dict(Counter(self.drawn) + Counter(self._draws(candidate)))
        eager: set[int] = set()
        raised: dict[int, dict[int, list[int]]] = {}
        for index in set(slot.own) - set(placed):  # placed now, but not by the change: waiting again
            self.assigned[index] = None
            bisect.insort(self.queues[(self.group[index], self.requests[index])], index)
            eager.update(self.eligible[self.group[index]])
        for index in placed:
            if self.assigned[index] is None:
                queue = self.queues[(self.group[index], self.requests[index])]
                del queue[bisect.bisect_left(queue, index)]
                for j, pricing, position, mixed in self._watched.pop(index, ()):
                    options = rounds.options[j]
                    if position >= len(options) or options[position].pricing != pricing:
                        continue  # priced again since
                    if mixed:
                        eager.add(j)
                        continue
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
        pod, group = self.pending[index], self.group[index]
        key = (group, self.requests[index], pod.priority)
        if key not in self._reasons:
            self._reasons[key] = explain(self, pod, [self.slots[i] for i in self.eligible[group]])
        return self._reasons[key]


def advise(view: DemandView, options: AdviseOptions | None = None, *, cache: CandidateCache | None = None) -> Advice:
    """The advice for `view` (see the module's docstring); `cache` keeps candidate prices between calls."""
    search = _Search(view, options or AdviseOptions(), cache)
    search.place_now()
    search.change(allow_evictions=False)
    search.change(allow_evictions=True)
    return search.result()
