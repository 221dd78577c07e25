"""Helpers for the agent's integration tests: waiting on the simulated cluster, reading its state,
and a crash that nothing in the agent can catch."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from migagent.attempt.phases import AgentPhase
from migagent.attempt.ports import PhaseHook
from migagent.clock import SystemClock
from migagent.node.names import (
    CONDITION_TYPE,
    CORDONED_BY_MIGAGENT_ANNOTATION,
    DEPLOY_LABEL_PREFIX,
    DESIRED_ANNOTATION,
    MIG_CONFIG_STATE_LABEL,
    MIG_RESOURCE_PREFIX,
    PAUSED_FOR_MIG_CHANGE,
)
from migagent_sim.cluster import PDB_BLOCKING_FOR_NOW, AnySimulation, SimCluster, SimClusterConfig
from migagent_sim.doubles.intercept import SimulatedCrash
from tests.waiting import eventually_value

BLOCKING_FOR_NOW = PDB_BLOCKING_FOR_NOW
T = TypeVar("T")
JsonDict = dict[str, Any]

# Two GPUs keep each reconfiguration short; the headline tests use the full 8-GPU node.
SMALL = SimClusterConfig(spec="2xH100-80GB-SXM", start_layout="all-1g.10gb")
# What the device plugin advertises for two H100s in each layout (mixed strategy).
SMALL_ALL_1G = {"nvidia.com/mig-1g.10gb": 14}
SMALL_BALANCED = {"nvidia.com/mig-1g.10gb": 4, "nvidia.com/mig-2g.20gb": 2, "nvidia.com/mig-3g.40gb": 2}


class ImpatientClock(SystemClock):
    """Real time, but every back-off sleep is ten times shorter (deadlines are unchanged)."""

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds / 10)


def crash_at(phase: AgentPhase) -> PhaseHook:
    def hook(current: AgentPhase) -> None:
        if current is phase:
            raise SimulatedCrash(f"agent killed as {phase.value} started")

    return hook


def eventually(check: Callable[[], T | None], *, what: str, timeout_s: float = 30.0) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` if it never does."""
    return eventually_value(check, what, timeout_s=timeout_s)


def node_when(
    cluster: AnySimulation, judge: Callable[[JsonDict], object], *, what: str, timeout_s: float = 30.0
) -> JsonDict:
    """Poll the Node until one read of it satisfies `judge`, and return that read.

    Every wait on the Node goes through here: a check made of two reads (the state label, then the
    annotations or allocatable) can pass on reads taken either side of one of the agent's writes."""

    def read() -> JsonDict | None:
        node = cluster.node()
        return node if judge(node) else None

    return eventually(read, what=what, timeout_s=timeout_s)


def state_of(node: JsonDict) -> str | None:
    labels: dict[str, str] = node["metadata"].get("labels", {})
    return labels.get(MIG_CONFIG_STATE_LABEL)


def annotations_of(node: JsonDict) -> dict[str, str]:
    return dict(node["metadata"].get("annotations", {}))


def condition_of(node: JsonDict) -> JsonDict | None:
    conditions = node.get("status", {}).get("conditions", [])
    found = next((c for c in conditions if c["type"] == CONDITION_TYPE), None)
    return dict(found) if found is not None else None


def advertised_of(node: JsonDict) -> dict[str, int]:
    """Non-zero MIG resources in Node allocatable (a stale resource reads 0, as on a real kubelet)."""
    allocatable: dict[str, str] = node.get("status", {}).get("allocatable", {})
    return {name: int(v) for name, v in allocatable.items() if name.startswith(MIG_RESOURCE_PREFIX) and int(v)}


def applied(node: JsonDict, layout: str) -> bool:
    """The Node says `success` for `layout` (its desired annotation names it), in one read."""
    return state_of(node) == "success" and layout in annotations_of(node).get(DESIRED_ANNOTATION, "")


def state(cluster: AnySimulation) -> str | None:
    return state_of(cluster.node())


def condition(cluster: AnySimulation) -> JsonDict:
    found = condition_of(cluster.node())
    assert found is not None, f"node has no {CONDITION_TYPE} condition"
    return found


def condition_reason(cluster: AnySimulation) -> str | None:
    found = condition_of(cluster.node())
    return str(found["reason"]) if found is not None else None


def advertised(cluster: AnySimulation) -> dict[str, int]:
    return advertised_of(cluster.node())


def node_annotations(cluster: AnySimulation) -> dict[str, str]:
    return annotations_of(cluster.node())


def paused_labels(cluster: AnySimulation) -> list[str]:
    labels: dict[str, str] = cluster.node()["metadata"].get("labels", {})
    return sorted(k for k, v in labels.items() if k.startswith(DEPLOY_LABEL_PREFIX) and v == PAUSED_FOR_MIG_CHANGE)


def assert_released(cluster: AnySimulation) -> None:
    """Nothing an attempt does to the node outside the GPUs is left behind."""
    node = cluster.node()
    assert not node["spec"].get("unschedulable"), "node left cordoned"
    assert CORDONED_BY_MIGAGENT_ANNOTATION not in node_annotations(cluster)
    assert paused_labels(cluster) == []


def request_counts(cluster: SimCluster, since: int = 0) -> Counter[str]:
    """Requests served since index `since`, as "verb resource[/subresource]"."""
    return Counter(
        f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}" for r in cluster.api.requests[since:]
    )


def workload_names(cluster: AnySimulation) -> set[str]:
    return {w.name for w in cluster.kubelet.workloads()}


def attached_pids(cluster: AnySimulation) -> set[int]:
    return {
        process.pid
        for gpu in cluster.fake.state.gpus
        for gi in gpu.gpu_instances
        for ci in gi.compute_instances
        for process in ci.processes
    }

