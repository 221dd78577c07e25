"""Seeded GPU pools at fleet scale, for the advice's scaling bench and its differential test.

`fleet(nodes)` builds a pool as the agents report it (simulator/migagent_sim/model_node.py): nodes of
two kinds, 8x H100-80GB-SXM (70%) and 8x A100-40GB, each in one of five layouts (one of them all-4g,
which no pod asks for), with 30-90% of their GPU instances held by running pods (priority 0 or 5; one in
twenty without a controller), in three zones. Then pods arrive: most ask one MIG device of their
kind's 1g, 2g, 3g or 7g profile (1g most, 7g least), `multi` of them
two devices of one profile or two profiles at once; 15% are bound to a zone by a nodeSelector, 5% to
three hosts by required node affinity; priorities 0, 5 and 10. As the scheduler would, each pod that
fits on a node it may run on is bound there; the next `pending_per_node` x nodes that fit nowhere stay
pending: the demand the advice is for. Four PodDisruptionBudgets select the running pods by app. The
same arguments always give the same pool.
"""

from __future__ import annotations

import random
from pathlib import Path

from migagent.demand.advise import DemandView
from migagent.layout.parse import parse_layout
from migagent.node.budgets import PdbView
from migagent.node.port import PodRef
from migagent.node.scheduling import DemandNode, DemandPod, NodeSelectorTerm, Requirement
from migagent_sim.model_node import ModelGi, ModelNode

REPO = Path(__file__).resolve().parents[1]
LAYOUTS = REPO / "configs/mig-layouts/mig-layouts.yaml"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
ZONES = 3
KINDS = (
    ("H100-80GB-SXM", ("all-1g.10gb", "all-3g.40gb", "all-balanced", "all-7g.80gb", "all-4g.40gb"),
     ("nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb", "nvidia.com/mig-7g.80gb")),
    ("A100-40GB", ("all-1g.5gb", "all-3g.20gb", "all-balanced", "all-7g.40gb", "all-4g.20gb"),
     ("nvidia.com/mig-1g.5gb", "nvidia.com/mig-2g.10gb", "nvidia.com/mig-3g.20gb", "nvidia.com/mig-7g.40gb")),
)
PENDING_PER_NODE = 12.5


class _Pool:
    """The nodes' idle GPU instances, found by resource and zone, for binding what fits."""

    def __init__(self, nodes: list[ModelNode]) -> None:
        self.nodes = nodes
        self.idle = [node.free_by_resource() for node in nodes]
        self.by_zone: dict[tuple[str, int], list[int]] = {}
        for index, idle in enumerate(self.idle):
            for resource in idle:
                self.by_zone.setdefault((resource, index % ZONES), []).append(index)

    def bind(self, pod: DemandPod, rng: random.Random) -> ModelNode | None:
        """A node the pod may run on with idle instances for all it asks (then held by it), or None."""
        resource = next(iter(pod.requests))
        if pod.affinity:
            hosts = [[int(h.rsplit("-", 1)[1]) for h in pod.affinity[0].expressions[0].values]]
        else:
            zones = [int(pod.node_selector[ZONE].rsplit("-", 1)[1])] if pod.node_selector else rng.sample(
                range(ZONES), ZONES)
            hosts = [self.by_zone.get((resource, z), []) for z in zones]
        for candidates in hosts:
            while candidates and not self.idle[candidates[-1]].get(resource) and not pod.affinity:
                candidates.pop()  # none of that resource idle there any more
            for index in reversed(candidates):
                idle = self.idle[index]
                if all(len(idle.get(r, ())) >= n for r, n in pod.requests.items()):
                    for r, n in pod.requests.items():
                        for _ in range(n):
                            idle[r].pop().pod = pod.name
                    return self.nodes[index]
                if pod.requests == {resource: 1} and not pod.affinity:
                    break  # the last holds one, or none holds any
        return None


def fleet(nodes: int, *, seed: int = 35, pending_per_node: float = PENDING_PER_NODE, multi: float = 0.03,
          profiles: float = 0.0, budgets: bool = True) -> DemandView:
    """A pool of `nodes` nodes and round(`pending_per_node` x nodes) pending pods (see the module)."""
    rng = random.Random(seed)
    layout = parse_layout(LAYOUTS.read_text(encoding="utf-8"), source=str(LAYOUTS))
    models: list[ModelNode] = []
    bound: list[DemandPod] = []
    for index in range(nodes):
        model, configs, _ = KINDS[0] if rng.random() < 0.7 else KINDS[1]
        name = f"gpu-{index:05d}"
        node = ModelNode.empty(name, model, 8, {HOSTNAME: name, ZONE: f"zone-{index % ZONES}"})
        node.start_change(layout, rng.choice(configs), done_at=0.0)
        node.finish_change(0.0)
        busy = rng.uniform(0.3, 0.9)
        for gi in (gi for gpu in node.gpus for gi in gpu.gis if rng.random() < busy):
            bound.append(_running(rng, node, gi, f"run-{len(bound):06d}"))
        models.append(node)
    pool = _Pool(models)
    pending: list[DemandPod] = []
    while len(pending) < round(pending_per_node * nodes):
        pod = _arriving(rng, len(bound) + len(pending), nodes, multi, profiles)
        host = pool.bind(pod, rng)
        if host is None:
            pending.append(pod)
        else:
            bound.append(DemandPod(pod.ref, pod.requests, pod.priority, node_name=host.name, phase="Running",
                                   labels=pod.labels, owner_kinds=pod.owner_kinds))
    pdbs = [PdbView("ml", f"app-{i}", {"app": f"app-{i}"}, disruptions_allowed=max(1, nodes // (2 + i)))
            for i in range(4)] if budgets else []
    return DemandView(nodes=[DemandNode(n.view()) for n in models], pods=[*bound, *pending], layout=layout,
                      budgets=pdbs, now=10_000.0)


def _running(rng: random.Random, node: ModelNode, gi: ModelGi, name: str) -> DemandPod:
    gi.pod = f"ml/{name}"
    return DemandPod(PodRef("ml", name, f"uid-{name}"), {node.resource_of(gi): 1}, priority=rng.choice((0, 0, 5)),
                     node_name=node.name, phase="Running", labels={"app": f"app-{rng.randrange(4)}"},
                     owner_kinds=("ReplicaSet",) if rng.random() < 0.95 else ())


def _arriving(rng: random.Random, index: int, nodes: int, multi: float, profiles: float) -> DemandPod:
    _, _, resources = KINDS[0] if rng.random() < 0.7 else KINDS[1]
    shape = rng.random()
    if shape < multi:
        requests = {rng.choice(resources[:2]): 2}
    elif shape < multi + profiles:
        requests = {resources[0]: 1, resources[2]: 1}
    else:
        requests = {rng.choices(resources, weights=(6, 2, 3, 1))[0]: 1}
    selector: dict[str, str] = {}
    affinity: tuple[NodeSelectorTerm, ...] = ()
    where = rng.random()
    if where < 0.15:
        selector = {ZONE: f"zone-{rng.randrange(ZONES)}"}
    elif where < 0.2:
        hosts = tuple(f"gpu-{rng.randrange(nodes):05d}" for _ in range(3))
        affinity = (NodeSelectorTerm(expressions=(Requirement(HOSTNAME, "In", hosts),)),)
    name = f"pod-{index:06d}"
    return DemandPod(PodRef("ml", name, f"uid-{name}"), requests, priority=rng.choice((0, 5, 10)),
                     created=float(rng.randrange(9_000)), labels={"app": f"app-{rng.randrange(4)}"},
                     node_selector=selector, affinity=affinity, owner_kinds=("ReplicaSet",))
