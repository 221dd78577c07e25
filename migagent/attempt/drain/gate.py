"""Decide before disturbing: which pods a change evicts, and whether it can succeed at all.

Runs after planning and before the first write to the Node. The pods on devices the plan disturbs
are scoped from PodResources (attempt.drain.scope); those that cannot leave make the change refused
with every such pod named, and nothing on the node is cordoned, paused or evicted:
* a DaemonSet pod (its controller puts it straight back on this node, on the same devices);
* a mirror (static) pod (the API server cannot evict it; the kubelet owns it);
* a pod without a controller (evicting it deletes it for good; allowed with --force-delete);
* a pod guarded by a PodDisruptionBudget that can never allow an eviction (maxUnavailable 0,
  minAvailable equal to the pods it expects, as an int or a percentage; ignored with --force-delete,
  which bypasses budgets), or by several budgets (the eviction API answers 500 for such a pod, for ever);
* a pod with emptyDir volumes, whose data an eviction deletes, unless --delete-emptydir-data;
* a process on a device the plan disturbs that the drain would not remove (attempt.drain.gpu_processes):
  a host process (named by pid and command), or a pod that holds the device without requesting it
  (a dcgm-exporter-style DaemonSet). The apply engine would find them only after the evictions.
A pod already Terminating is not evicted again: the drain waits for it (attempt.drain.drainer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import structlog

from migagent.attempt.drain.gpu_processes import processes_in_the_way
from migagent.attempt.drain.scope import PodDeviceHolding, PodDevicesLister, disturbed_pods, evictable, gi_workloads
from migagent.errors import DrainBlockedError
from migagent.layout.desired import DesiredNode
from migagent.layout.observed import Observation
from migagent.node.budgets import PdbView, guarding
from migagent.node.port import KubePort, PodView
from migagent.planning import Plan, plan
from migagent.reconcile.journal import desired_node_hash
from migagent.reconcile.machine import Planner

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class GateSettings:
    """What the gate may look at and what it may allow."""

    proc_root: Path | None = None
    """Where the host's processes are visible (/proc with hostPID): an NVML process is mapped to its pod
    through /proc/<pid>/cgroup, or named by pid and command. None: pids are not looked up."""
    delete_emptydir_data: bool = False
    """Evict pods with emptyDir volumes (their data is lost), as `kubectl drain --delete-emptydir-data`."""


class DrainRefusedError(DrainBlockedError):
    """The change would need pods gone that cannot be evicted; refused before the node was touched."""


@dataclass(frozen=True)
class Target:
    """A layout resolved against what the GPUs hold now, and what the gate let through for it: the
    plan, the planner that made it (the engine re-plans with the same workloads per GI), the pods to evict."""

    name: str
    desired: DesiredNode
    observation: Observation
    steps: Plan
    planner: Planner = plan
    evict: tuple[PodView, ...] = ()
    pods: tuple[PodView, ...] | None = None
    """The node's pods the gate judged (None: not listed yet)."""

    @cached_property
    def layout_hash(self) -> str:
        """The journal's key for this desired layout, and the Node's `desired` annotation: hashed once."""
        return desired_node_hash(self.desired)


def plan_and_gate(
    api: KubePort,
    pod_resources: PodDevicesLister,
    target: Target,
    *,
    force_delete: bool,
    gate: GateSettings | None = None,
    pods: Sequence[PodView] | None = None,
) -> Target:
    """Plan for the fewest evicted pods and run the safety gate, before anything on the Node changes.
    `pods`: the node's pods as listed earlier in this attempt, before any write (one list serves both)."""
    pods = list(pods) if pods is not None else api.list_pods_on_node()
    holdings = pod_resources.list()
    workloads = gi_workloads(target.observation, holdings)

    def planner(seen: Observation, wanted: DesiredNode) -> Plan:
        return plan(seen, wanted, workloads=workloads)

    # With no pod on any GI the fewest-evicted plan is the one already made: not planned again.
    steps = planner(target.observation, target.desired) if workloads else target.steps
    decision = decide_drain(api, steps, target.observation, holdings, pods, force_delete=force_delete, gate=gate)
    return Target(target.name, target.desired, target.observation, steps, planner, decision.evict, tuple(pods))


@dataclass(frozen=True)
class DrainDecision:
    evict: tuple[PodView, ...]
    """Pods to evict, each on a device the plan disturbs."""


def _unmovable(pod: PodView, *, force_delete: bool) -> str | None:
    if pod.is_daemonset_pod:
        return "a DaemonSet pod (its controller would put it back on this node, on the same device)"
    if pod.is_mirror:
        return "a static (mirror) pod, which only the kubelet can remove"
    if not pod.owner_kinds and not force_delete:
        return "without a controller: evicting it deletes it for good (move it, or run with --force-delete)"
    return None


def _never_evictable(api: KubePort, pods: Sequence[PodView]) -> dict[str, str]:
    """Pod -> the budget(s) that can never allow its eviction (budgets listed once per namespace)."""
    found: dict[str, str] = {}
    budgets: dict[str, list[PdbView]] = {}
    for pod in pods:
        namespace = pod.ref.namespace
        if namespace not in budgets:
            budgets[namespace] = api.list_pdbs(namespace)
        guards = guarding(budgets[namespace], namespace, pod.labels)
        if len(guards) > 1:
            names = ", ".join(f"{b.namespace}/{b.name}" for b in guards)
            found[str(pod.ref)] = (
                f"guarded by {len(guards)} PodDisruptionBudgets ({names}): the eviction API refuses (500) to evict"
                " a pod more than one budget selects"
            )
            continue
        for budget in guards:
            why = budget.never_allows(pod_ready=pod.ready)
            if why is not None:
                found[str(pod.ref)] = why
    return found


def decide_drain(
    api: KubePort,
    plan: Plan,
    observation: Observation,
    holdings: Sequence[PodDeviceHolding],
    pods: Sequence[PodView],
    *,
    force_delete: bool,
    gate: GateSettings | None = None,
    processes: bool = True,
) -> DrainDecision:
    """The pods to evict; raises DrainRefusedError naming every pod (or process) in the way, and why.

    `processes`: judge the observation's GPU processes too. The drain's second look (after the cordon)
    passes False: it has the same, older observation, whose processes the first look judged already,
    against pods and PodResources that have moved on since (a pod gone, its process gone with it)."""
    settings = gate or GateSettings()
    disturbed = disturbed_pods(plan, observation, holdings, pods)
    refused = {str(p.ref): why for p in disturbed if (why := _unmovable(p, force_delete=force_delete)) is not None}
    evict = [p for p in disturbed if evictable(p)]
    movable = [p for p in evict if str(p.ref) not in refused and not p.deleting]
    if movable and not force_delete:
        refused.update(_never_evictable(api, movable))
    if not settings.delete_emptydir_data:
        refused.update(
            (str(p.ref), f"using emptyDir volume(s) {', '.join(p.empty_dir_volumes)}, whose data an eviction deletes"
             " (run with --delete-emptydir-data to allow it)")
            for p in movable
            if p.empty_dir_volumes and str(p.ref) not in refused
        )
    in_the_way = (
        processes_in_the_way(plan, observation, holdings, pods, evict, proc_root=settings.proc_root)
        if processes
        else {}
    )
    if refused or in_the_way:
        listed = "; ".join(
            [
                f"pod {name} is {why}" if why.startswith(("a ", "without")) else f"pod {name}: {why}"
                for name, why in sorted(refused.items())
            ]
            + [f"{what} {why}" for what, why in sorted(in_the_way.items())]
        )
        refused.update(in_the_way)
        log.warning("change_refused", pods=sorted(refused))
        raise DrainRefusedError(
            f"the change needs {len(refused)} pod(s) or process(es) off devices it disturbs that cannot be moved:"
            f" {listed}."
            " Nothing was cordoned, paused or evicted; move the pod(s), relax the PodDisruptionBudget(s),"
            " or choose a layout that keeps their GPU instances",
            pods=tuple(sorted(refused)),
        )
    return DrainDecision(evict=tuple(evict))
