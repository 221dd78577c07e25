"""Why a pending pod stays unserved, in one line, from the first of these that holds:

1. no node it may run on (selector, affinity, taints, cordon), each node's reason;
2. the nodes it may run on cannot be changed now (no agent report, a change under way, opted out...);
3. no layout offers what it asks for on those nodes (with a hint to --generate);
4. every layout that offers it would evict pods of its priority or higher, or a pod no drain moves,
   or draw a PodDisruptionBudget below what it allows (each rule that rules a layout out is named);
5. the capacity those layouts offer went to pods of higher priority or that waited longer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from migagent.demand.candidates import Candidate
from migagent.node.scheduling import DemandPod, describe_requests

_SHOWN = 3


class SlotView(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def not_changed(self) -> str: ...

    def may_run(self, pod: DemandPod) -> str | None: ...


S = TypeVar("S", bound=SlotView)


class SearchView(Protocol[S]):
    @property
    def slots(self) -> Sequence[S]: ...

    @property
    def changed(self) -> Mapping[str, Candidate]: ...

    def overdraws(self, candidate: Candidate) -> str: ...

    @property
    def generating(self) -> bool: ...

    def candidates_of(self, slot: S) -> list[Candidate]: ...


def _listed(items: Iterable[str]) -> str:
    shown = list(items)
    more = len(shown) - _SHOWN
    return "; ".join(shown[:_SHOWN]) + (f"; and {more} more" if more > 0 else "")


def _offers(candidate: Candidate, pod: DemandPod) -> bool:
    return all(candidate.capacity.get(resource, 0) >= count for resource, count in pod.requests.items())


def explain(search: SearchView[S], pod: DemandPod, nodes: Sequence[S]) -> str:
    """Why `pod` waits; `nodes`: the slots it may run on."""
    asks = describe_requests(pod.requests)
    if not nodes:
        refused = (f"{s.name}: {s.may_run(pod)}" for s in search.slots)
        return f"no node it may run on ({_listed(refused)})" if search.slots else "no GPU node"
    open_nodes = [s for s in nodes if not s.not_changed and s.name not in search.changed]
    if not open_nodes:
        held = (f"{s.name}: {s.not_changed or 'changed for other pods'}" for s in nodes)
        return f"{asks} is not free on the nodes it may run on, and none can be changed now ({_listed(held)})"
    closed = [f"{s.name}: {s.not_changed}" for s in nodes if s.not_changed]
    suffix = f"; cannot change now: {_listed(closed)}" if closed else ""
    return _why_not_open(search, pod, open_nodes) + suffix


def _why_not_open(search: SearchView[S], pod: DemandPod, open_nodes: Sequence[S]) -> str:
    """Why the nodes that may change do not serve the pod."""
    asks = describe_requests(pod.requests)
    hint = "" if search.generating else (
        " (`migagent advise --generate` builds layouts per node around the busy GPU instances)"
    )
    higher: list[str] = []
    other: list[str] = []
    offering = (c for s in open_nodes for c in search.candidates_of(s) if c.capacity and _offers(c, pod))
    for candidate in offering:  # every rule that rules each out
        where = f"{candidate.node} -> {candidate.layout}"
        blocked = candidate.problem or (search.overdraws(candidate) if candidate.evictions else "")
        other += [f"{where}: {blocked}"] if blocked else []
        if not candidate.problem and candidate.floor >= pod.priority:
            higher.append(where)
        elif not blocked:  # one offers it and nothing rules it out
            return f"the {asks} a change could offer went to pods of higher priority or that waited longer"
    if not higher and not other:
        names = ", ".join(s.name for s in open_nodes)
        return f"no layout in the file offers {asks} on the nodes it may run on ({names}){hint}"
    ruled = ([f"they evict pods of priority >= {pod.priority}, and pods are never evicted for pods of equal or"
              f" lower priority ({_listed(higher)})"] if higher else []) + sorted(set(other))
    return f"every layout offering {asks} is ruled out: {_listed(ruled)}{hint}"
