"""Decide before disturbing: which pods a change evicts, and whether it can succeed at all.

Runs after planning and before the first write to the Node. The pods on devices the plan disturbs
are scoped from PodResources (kube.drain_scope); those that cannot leave make the change refused
with every such pod named, and nothing on the node is cordoned, paused or evicted:
* a DaemonSet pod (its controller puts it straight back on this node, on the same devices);
* a mirror (static) pod (the API server cannot evict it; the kubelet owns it);
* a pod without a controller (evicting it deletes it for good; allowed with --force-delete);
* a pod guarded by a PodDisruptionBudget that can never allow an eviction (maxUnavailable 0,
  minAvailable equal to the pods it expects; ignored with --force-delete, which bypasses budgets).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import structlog

from migagent.errors import DrainBlockedError
from migagent.kube.drain import DrainPlanner, PodDeviceHolding
from migagent.kube.drain_scope import PlanChanges
from migagent.kube.pdbs import PdbView, guarding
from migagent.kube.port import PodView
from migagent.layout.observed import Observation

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


class PdbLister(Protocol):
    def list_pdbs(self, namespace: str) -> list[PdbView]: ...


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


def _never_evictable(api: PdbLister, pods: Sequence[PodView]) -> dict[str, str]:
    """Pod -> the budget that can never allow its eviction (budgets listed once per namespace)."""
    found: dict[str, str] = {}
    budgets: dict[str, list[PdbView]] = {}
    for pod in pods:
        namespace = pod.ref.namespace
        if namespace not in budgets:
            budgets[namespace] = api.list_pdbs(namespace)
        for budget in guarding(budgets[namespace], namespace, pod.labels):
            why = budget.never_allows()
            if why is not None:
                found[str(pod.ref)] = why
    return found


def decide_drain(
    api: PdbLister,
    plan: PlanChanges,
    observation: Observation,
    holdings: Sequence[PodDeviceHolding],
    pods: Sequence[PodView],
    *,
    force_delete: bool,
) -> DrainDecision:
    """The pods to evict; raises DrainRefusedError naming every pod that cannot leave, and why."""
    disturbed = DrainPlanner().disturbed_pods(plan, observation, holdings, pods)
    refused = {str(p.ref): why for p in disturbed if (why := _unmovable(p, force_delete=force_delete)) is not None}
    evict = [p for p in disturbed if not (p.is_daemonset_pod or p.is_mirror)]
    if evict and not force_delete:
        refused.update(_never_evictable(api, [p for p in evict if str(p.ref) not in refused]))
    if refused:
        listed = "; ".join(
            f"pod {name} is {why}" if why.startswith(("a ", "without")) else f"pod {name}: {why}"
            for name, why in sorted(refused.items())
        )
        log.warning("change_refused", pods=sorted(refused))
        raise DrainRefusedError(
            f"the change needs {len(refused)} pod(s) off devices it disturbs that cannot be evicted: {listed}."
            " Nothing was cordoned, paused or evicted; move the pod(s), relax the PodDisruptionBudget(s),"
            " or choose a layout that keeps their GPU instances",
            pods=tuple(sorted(refused)),
        )
    return DrainDecision(evict=tuple(evict))
