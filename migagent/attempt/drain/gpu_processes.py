"""Who runs the NVML processes on the devices a change disturbs: a pod, a host process, or no one we can name.

The apply engine would refuse to destroy a GI with a process on it (NVML IN_USE), but only after the
node was cordoned and workloads evicted; so the safety gate asks first. Every process NVML reports
on a GI the plan destroys (or on a GPU it resets or switches mode) is attributed:
- with the host's processes visible (hostPID, `proc_root`=/proc), `/proc/<pid>/cgroup` names the pod
  UID (`.../kubepods/.../pod<uid>/...` or `kubepods-...-pod<uid_with_underscores>.slice`): a pod the
  drain evicts is fine; any other pod (a DaemonSet like dcgm-exporter, a pod without a GPU request) is
  in the way; a process in no pod's cgroup is a host process, named by pid and command;
- where the pid cannot be looked up (no hostPID), a process on a device that pods the drain evicts
  hold (PodResources) is taken to be theirs; on a device no evicted pod holds, it is in the way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from migagent.attempt.drain.scope import Disturbance, PodDeviceHolding, device_locations
from migagent.catalog.model import Placement
from migagent.layout.observed import Observation
from migagent.node.names import is_gpu_resource
from migagent.node.port import PodView
from migagent.planning import Plan

_POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    gpu: int
    placement: Placement | None
    """The GI it runs in; None for a process on a GPU with MIG off."""

    @property
    def where(self) -> str:
        return f"GPU {self.gpu}" + (f" GPU instance at {self.placement}" if self.placement is not None else "")


def disturbed_processes(plan: Plan, observation: Observation) -> list[GpuProcess]:
    """Every process on a GI the plan destroys, or anywhere on a GPU it resets or switches mode."""
    disturbance = Disturbance.of(plan)
    found: list[GpuProcess] = []
    for gpu in observation.gpus:
        if gpu.index in disturbance.whole_gpus:
            found += [GpuProcess(p.pid, gpu.index, None) for p in gpu.processes]
        for gi in gpu.gpu_instances:
            if disturbance.touches(gpu.index, gi.placement):
                found += [
                    GpuProcess(p.pid, gpu.index, gi.placement) for ci in gi.compute_instances for p in ci.processes
                ]
    return found


def pod_uid_of(pid: int, proc_root: Path) -> tuple[bool, str | None]:
    """(visible, pod UID): whether /proc shows the pid at all, and the pod its cgroup names (None: none)."""
    try:
        text = (proc_root / str(pid) / "cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False, None
    match = _POD_UID.search(text)
    return True, match.group(1).replace("_", "-") if match else None


def command_of(pid: int, proc_root: Path) -> str:
    for name in ("cmdline", "comm"):
        try:
            raw = (proc_root / str(pid) / name).read_bytes()
        except OSError:
            continue
        text = raw.replace(b"\0", b" ").decode("utf-8", errors="replace").strip()
        if text:
            return text[:120]
    return "command unknown"


def processes_in_the_way(
    plan: Plan,
    observation: Observation,
    holdings: Iterable[PodDeviceHolding],
    pods: Sequence[PodView],
    evicted: Sequence[PodView],
    *,
    proc_root: Path | None,
) -> dict[str, str]:
    """What (pod name or `process <pid>`) holds a disturbed device and would not be gone after the drain -> why."""
    evicted_uids = {pod.ref.uid for pod in evicted}
    by_uid = {pod.ref.uid: pod for pod in pods if pod.ref.uid}
    holders = _holders(observation, holdings)
    # Leaving: the pods the drain evicts, and holders PodResources still lists that the API no longer has
    # (deleted; the kubelet's view lags, and their processes go with them).
    listed = {(pod.ref.namespace, pod.ref.name) for pod in pods}
    evicted_names = {(pod.ref.namespace, pod.ref.name) for pod in evicted} | {
        name for names in holders.values() for name in names if name not in listed
    }
    found: dict[str, str] = {}
    for process in disturbed_processes(plan, observation):
        visible, uid = pod_uid_of(process.pid, proc_root) if proc_root is not None else (False, None)
        if uid is not None:
            if uid in evicted_uids:
                continue
            pod = by_uid.get(uid)
            name = str(pod.ref) if pod is not None else f"with uid {uid}"
            why = _pod_reason(pod)
            found[f"pod {name}"] = f"runs process {process.pid} on {process.where}, {why}"
        elif visible:
            command = command_of(process.pid, proc_root) if proc_root is not None else "command unknown"
            found[f"host process {process.pid}"] = f"({command}) runs on {process.where}, outside any pod"
        elif not _held_only_by(holders, process, evicted_names):
            found[f"process {process.pid}"] = (
                f"runs on {process.where}, which no pod the drain evicts holds (give the agent hostPID to name it)"
            )
    return found


def _pod_reason(pod: PodView | None) -> str:
    if pod is None:
        return "in a pod not on this node's list"
    if pod.is_daemonset_pod:
        return "a DaemonSet pod that requests no GPU device (its controller would keep it here)"
    if not pod.gpu_resources:
        return "a pod that requests no GPU device, so the drain would not move it"
    return "a pod the drain does not evict"


def _holders(
    observation: Observation, holdings: Iterable[PodDeviceHolding]
) -> Mapping[tuple[int, Placement | None], set[tuple[str, str]]]:
    locations = device_locations(observation)
    held: dict[tuple[int, Placement | None], set[tuple[str, str]]] = {}
    for entry in holdings:
        if not is_gpu_resource(entry.resource_name):
            continue
        for raw in entry.device_ids:
            location = locations.get(raw.split("::", 1)[0])
            if location is not None:
                held.setdefault(location, set()).add((entry.namespace, entry.name))
    return held


def _held_only_by(
    holders: Mapping[tuple[int, Placement | None], set[tuple[str, str]]],
    process: GpuProcess,
    evicted: set[tuple[str, str]],
) -> bool:
    """Whether some evicted pod holds the device the process runs on (a whole GPU: any device of it)."""
    if process.placement is not None:
        pods = holders.get((process.gpu, process.placement), set())
    else:
        pods = set().union(*(names for (gpu, _), names in holders.items() if gpu == process.gpu))
    return bool(pods) and pods <= evicted
