"""One candidate change: a node moved to a layout, priced by the rollout's prediction, and what it frees.

The price is `rollout.impact.predict` (the planner the agent runs, with the pods per GPU instance the
agent reported) completed by `with_pods_now` (GPU pods started since the report count as evicted):
the same numbers `migagent rollout plan` prints. What the change offers pending pods is the layout's
capacity under the node's MIG strategy, less what the pods that stay request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from migagent.demand.nodes import free, under_strategy
from migagent.errors import MigAgentError
from migagent.layout.profile import ci_profile_name
from migagent.layout.resolve import identity_of, resolve_config
from migagent.layout.spec import LayoutFile
from migagent.layout.strategy import MigStrategy, mig_resource_name
from migagent.node.names import GPU_RESOURCE, MIG_RESOURCE_PREFIX
from migagent.node.scheduling import DemandNode, DemandPod
from migagent.rollout.impact import NodeImpact, predict, with_pods_now
from migagent.rollout.reported import ReportedNode

NO_EVICTION = -(2**31) - 1
"""Below every pod priority (int32): the floor when a change evicts nothing."""


@dataclass(frozen=True)
class Candidate:
    node: str
    layout: str
    impact: NodeImpact
    capacity: Mapping[str, int] = field(default_factory=dict, hash=False)
    """What the node advertises once changed, under its MIG strategy."""
    free: Mapping[str, int] = field(default_factory=dict, hash=False)
    """Units of each resource left for pending pods once the change is done and the evicted pods gone."""
    floor: int = NO_EVICTION
    """The highest priority among the pods it evicts: only pods above it may be served by it."""
    victims: tuple[int, ...] = ()
    """The priorities of the pods it evicts, highest first."""
    problem: str = ""

    @property
    def evictions(self) -> int:
        return len(self.impact.evicts)


def evaluate(
    node: DemandNode,
    reported: ReportedNode,
    layout: LayoutFile,
    name: str,
    *,
    strategy: MigStrategy,
    bound: Mapping[str, DemandPod],
) -> Candidate:
    """`node` changed to layout `name`: its price, what it frees, or the problem that rules it out.
    `bound`: the GPU pods on the node by name."""
    drained = (n for n, p in bound.items() if not p.finished and "DaemonSet" not in p.owner_kinds and not p.is_mirror)
    impact = with_pods_now(predict(node.name, reported, layout, name), drained)  # as rollout.driver.gpu_pods lists
    if not impact.plannable:
        return Candidate(node.name, name, impact, problem=impact.problem)
    capacity, refused = under_strategy(impact.capacity_after, strategy)
    if refused:
        return Candidate(node.name, name, impact, problem=refused)
    priced = Candidate(node.name, name, impact, capacity=capacity)
    evicted = [bound[pod] for pod in impact.evicts if pod in bound]
    stuck = next(((pod, why) for pod in evicted if (why := pod.movable) is not None), None)
    if stuck is not None:
        return replace(priced, problem=f"it would evict {stuck[0].name}, {stuck[1]}")
    staying = [pod for n, pod in bound.items() if n not in impact.evicts and not pod.finished]
    victims = tuple(sorted((pod.priority for pod in evicted), reverse=True))
    return replace(priced, free=free(capacity, staying), floor=victims[0] if victims else NO_EVICTION, victims=victims)


_OFFERED: dict[tuple[object, ...], frozenset[str] | None] = {}
_OFFERED_KEPT = 4096


def offered(reported: ReportedNode, layout: LayoutFile, name: str, strategy: MigStrategy) -> frozenset[str] | None:
    """The resources the GPUs that layout `name` selects would advertise, whatever pods run: a cheap
    first look (no planning) at whether a change could serve a request. None when the layout does not
    resolve on the node (the full evaluation says why)."""
    gpus = reported.observation.gpus
    key = (tuple((g.index, g.pci_device_id, g.pci_subsystem_id, g.mig_capable) for g in gpus),
           layout.configs[name], strategy)
    if key not in _OFFERED:
        if len(_OFFERED) > _OFFERED_KEPT:
            _OFFERED.clear()
        _OFFERED[key] = _offered(reported, layout, name, strategy)
    return _OFFERED[key]


def _offered(reported: ReportedNode, layout: LayoutFile, name: str, strategy: MigStrategy) -> frozenset[str] | None:
    gpus = reported.observation.gpus
    try:
        desired = resolve_config(layout, name, [identity_of(gpu) for gpu in gpus])
    except MigAgentError:
        return None
    names: set[str] = set()
    for want in desired.gpus:
        table = reported.observation.gpu(want.index).profiles
        if not want.mig_enabled or table is None:
            names.add(GPU_RESOURCE)
            continue
        for gi in want.gpu_instances:
            profile = table.gi_profile(gi.profile_id)
            for ci_id in gi.ci_profile_ids:
                ci = profile.ci_profile(ci_id) if profile is not None else None
                if profile is not None and ci is not None:
                    names.add(mig_resource_name(ci_profile_name(profile, ci, table)))
    if strategy is MigStrategy.SINGLE and any(n.startswith(MIG_RESOURCE_PREFIX) for n in names):
        return frozenset({GPU_RESOURCE})
    return frozenset(names)
