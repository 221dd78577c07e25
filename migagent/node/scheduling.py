"""GPU pods and nodes as `migagent advise` sees them, and whether a pod may run on a node, as the
scheduler decides it (values read by kube/demand_api.py; the advice in migagent/demand is pure).

A pod may run on a node when the node is not cordoned, the pod's `nodeSelector` matches the node's
labels, one of its required node-affinity terms matches (`requiredDuringSchedulingIgnoredDuringExecution`:
terms ORed, expressions ANDed; `matchFields` on `metadata.name`), and it tolerates every NoSchedule and
NoExecute taint of the node (the scheduler's NodeUnschedulable, NodeAffinity and TaintToleration
filters). Preferred affinity and PreferNoSchedule taints only rank nodes, so they are not filters here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from migagent.node.names import GPU_RESOURCE, MIG_CONFIG_LABEL, MIG_RESOURCE_PREFIX, is_gpu_resource
from migagent.node.port import NodeView, PodRef

HARD_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True)
class Requirement:
    """One node selector requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        match self.operator:
            case "In":
                return value is not None and value in self.values
            case "NotIn":
                return value is None or value not in self.values
            case "Exists":
                return value is not None
            case "DoesNotExist":
                return value is None
            case "Gt" | "Lt":
                return _compare(value, self.values, greater=self.operator == "Gt")
        return False  # an operator the API server would have refused


def _compare(value: str | None, values: tuple[str, ...], *, greater: bool) -> bool:
    try:
        have, bound = int(value or ""), int(values[0])
    except (ValueError, IndexError):
        return False
    return have > bound if greater else have < bound


@dataclass(frozen=True)
class NodeSelectorTerm:
    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()
    """`matchFields`: only `metadata.name` exists for nodes."""

    def matches(self, node: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False  # an empty term selects nothing (the API's rule)
        names = {"metadata.name": node}
        return all(r.matches(labels) for r in self.expressions) and all(r.matches(names) for r in self.fields)


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


@dataclass(frozen=True)
class DemandPod:
    """A pod that requests GPUs: pending (no node yet) or bound to a node."""

    ref: PodRef
    requests: Mapping[str, int] = field(default_factory=dict, hash=False)
    """GPU resources (`nvidia.com/mig-*`, `nvidia.com/gpu`) and the count the pod needs of each."""
    priority: int = 0
    node_name: str = ""
    phase: str = "Pending"
    created: float = 0.0
    """creationTimestamp, wall seconds: how long a pending pod has waited."""
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    node_selector: Mapping[str, str] = field(default_factory=dict, hash=False)
    affinity: tuple[NodeSelectorTerm, ...] = ()
    """Required node-affinity terms (ORed); empty: no requirement."""
    tolerations: tuple[Toleration, ...] = ()
    owner_kinds: tuple[str, ...] = ()
    owner: str = ""
    """Its controller's uid: pods of one owner asking alike are one demand (a burst)."""
    is_mirror: bool = False
    deleting: bool = False

    @property
    def name(self) -> str:
        return str(self.ref)

    @property
    def pending(self) -> bool:
        return not self.node_name and self.phase == "Pending" and not self.deleting

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def movable(self) -> str | None:
        """Why a drain could not evict this pod (the agent's gate refuses the change), or None."""
        if self.is_mirror:
            return "a static (mirror) pod"
        if "DaemonSet" in self.owner_kinds:
            return "a DaemonSet pod"
        if not self.owner_kinds:
            return "a pod without a controller (nothing would recreate it)"
        return None

    def may_run_on(self, node: str, labels: Mapping[str, str], taints: Sequence[Taint]) -> str | None:
        """Why the scheduler would not place this pod on the node (one phrase), or None when it may."""
        wrong = sorted(k for k, v in self.node_selector.items() if labels.get(k) != v)
        if wrong:
            return f"nodeSelector {', '.join(f'{k}={self.node_selector[k]}' for k in wrong)} does not match"
        if self.affinity and not any(term.matches(node, labels) for term in self.affinity):
            return "required node affinity does not match"
        untolerated = [t for t in taints if t.effect in HARD_TAINT_EFFECTS and not self._tolerated(t)]
        if untolerated:
            return f"taint {untolerated[0]} is not tolerated"
        return None

    def _tolerated(self, taint: Taint) -> bool:
        return any(toleration.tolerates(taint) for toleration in self.tolerations)


def gpu_requests(
    containers: Sequence[Mapping[str, int]], init_containers: Sequence[Mapping[str, int]]
) -> dict[str, int]:
    """A pod's effective GPU requests, as the scheduler counts them: per resource, the larger of the
    containers' sum and any one init container's request."""
    total: dict[str, int] = {}
    for requests in containers:
        for name, count in requests.items():
            if is_gpu_resource(name) and count > 0:
                total[name] = total.get(name, 0) + count
    for requests in init_containers:
        for name, count in requests.items():
            if is_gpu_resource(name) and count > total.get(name, 0):
                total[name] = count
    return dict(sorted(total.items()))


def is_mig_demand(requests: Mapping[str, int]) -> bool:
    """Whether the pod asks for something a MIG layout serves: a MIG device, or `nvidia.com/gpu`."""
    return any(name.startswith(MIG_RESOURCE_PREFIX) or name == GPU_RESOURCE for name in requests)


def describe_requests(requests: Mapping[str, int]) -> str:
    return ", ".join(f"{name}={count}" for name, count in sorted(requests.items())) or "nothing"


@dataclass(frozen=True)
class DemandNode:
    """A node with the taints the scheduler filters by (NodeView leaves them out)."""

    view: NodeView
    taints: tuple[Taint, ...] = ()

    @property
    def name(self) -> str:
        return self.view.name

    @property
    def layout(self) -> str | None:
        return self.view.labels.get(MIG_CONFIG_LABEL)
