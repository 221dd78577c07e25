"""A pool of model GPU nodes (model_node.py) behind the autopilot's port, in memory, on a fake clock.

It plays the rest of the cluster for the demand bench and the autopilot's fast tests:
- the scheduler: `schedule()` binds each pending pod (highest priority first, then oldest) to the
  first free device of what it requests on a node it may run on (selector, affinity, taints, cordon);
- the agents: a relabel (`set_layout`, what the rollout writes) starts the node's change, which ends
  `reconfigure_s` later (`advance`);
- the workload controllers: an evicted pod is replaced by a new pending pod of the same job, with
  the time the job still had to run;
- the API server's objects the rollout and the autopilot keep: their state objects (409 on a stale
  resourceVersion) and Events; PodDisruptionBudgets are listed as given (their status never moves).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from migagent.clock import FakeClock
from migagent.kube.rollout_api import StoredState
from migagent.layout.parse import parse_layout
from migagent.node.budgets import PdbView
from migagent.node.port import NodeChangedError, NodeView, PodRef, PodView
from migagent.node.scheduling import DemandNode, DemandPod
from migagent.node.selectors import parse_equality
from migagent_sim.doubles.state_objects import StateObjects
from migagent_sim.model_node import ModelGi, ModelNode


@dataclass
class Job:
    """A pod's work: what it asks, how long it runs once started, and how each of its pods fared."""

    name: str
    requests: Mapping[str, int]
    duration_s: float
    priority: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    patience_s: float | None = None
    """How long its owner lets a pod of it wait before withdrawing it (None: for ever)."""
    owner: str = ""
    """The controller its pods belong to (several jobs may share one: a burst); "" for the job's own."""
    remaining_s: float = 0.0
    waits: list[float] = field(default_factory=list)
    """Seconds each of its pods waited before it ran."""
    evictions: int = 0


@dataclass
class RunningPod:
    pod: DemandPod
    job: Job
    devices: list[ModelGi] = field(default_factory=list)
    started: float = 0.0


@dataclass(frozen=True)
class RecordedEvent:
    node: str | None
    reason: str
    message: str
    at: float


class ModelPool(StateObjects):
    def __init__(self, nodes: Sequence[ModelNode], layouts: str, *, clock: FakeClock, reconfigure_s: float = 60.0,
                 namespace: str = "ml") -> None:
        super().__init__(namespace="model-pool")
        self.nodes = {node.name: node for node in nodes}
        self.layouts = layouts
        self.layout = parse_layout(layouts, source="model pool layouts")
        self.clock = clock
        self.reconfigure_s = reconfigure_s
        self.namespace = namespace
        self.pending: dict[str, tuple[DemandPod, Job]] = {}
        self._queue: list[tuple[int, float, str]] = []  # the scheduler's order, kept from one tick to the next
        self.running: dict[str, RunningPod] = {}
        self.budgets: list[PdbView] = []
        self.events: list[RecordedEvent] = []
        self.relabels: list[tuple[float, str, str | None]] = []
        self.gpus_reconfigured = 0
        self._serial = itertools.count(1)
        self.on_change: Callable[[str, str | None], None] | None = None

    # --- the workload ---------------------------------------------------------------------------------

    def submit(self, job: Job) -> DemandPod:
        """A new pending pod for `job` (its first, or the replacement of an evicted one)."""
        if not job.remaining_s:
            job.remaining_s = job.duration_s
        name = f"{job.name}-{next(self._serial)}"
        pod = DemandPod(
            ref=PodRef(self.namespace, name, f"uid-{name}"), requests=dict(job.requests), priority=job.priority,
            created=self.clock.wall(), labels=dict(job.labels), node_selector=dict(job.node_selector),
            owner_kinds=("ReplicaSet",), owner=job.owner or job.name,
        )
        self.pending[pod.name] = (pod, job)
        return pod

    def cancel(self, job_name: str) -> None:
        """The job's owner gave up on a pod still pending (what an alternating demand does)."""
        for name, (_, job) in list(self.pending.items()):
            if job.name == job_name:
                del self.pending[name]

    def schedule(self) -> list[str]:
        """Bind what fits; returns the pods bound."""
        free = {node.name: node.free_by_resource() for node in self.nodes.values()}
        offering: dict[str, list[ModelNode]] = {}  # resource -> the nodes with one free, in order
        for each in self.nodes.values():
            for resource in free[each.name]:
                offering.setdefault(resource, []).append(each)
        for nodes in offering.values():
            nodes.reverse()
        bound: list[str] = []
        for name in self._queued():
            pod, job = self.pending[name]
            first = next(iter(pod.requests), "")
            nodes = offering.get(first, [])
            while nodes and not free[nodes[-1].name][first]:  # kept reversed: the first node to try last
                nodes.pop()  # none left there: no later pod asking it fits there either
            node = self._fit(pod, free, reversed(nodes))
            if node is None:
                continue
            gis = [free[node.name][resource].pop() for resource, count in pod.requests.items() for _ in range(count)]
            for gi in gis:
                gi.pod = pod.name
            node.version += 1
            now = self.clock.wall()
            job.waits.append(now - pod.created)
            self.running[name] = RunningPod(replace(pod, node_name=node.name, phase="Running"), job, gis, now)
            del self.pending[name]
            bound.append(name)
        return bound

    def _queued(self) -> list[str]:
        """The pending pods, highest priority first, then oldest: last tick's order (one run to Timsort) with
        the new pods added, so a long queue is not sorted from scratch at every tick."""
        queued = {key[2] for key in self._queue}
        self._queue = [key for key in self._queue if key[2] in self.pending]
        self._queue += [(-pod.priority, pod.created, name) for name, (pod, _) in self.pending.items()
                        if name not in queued]
        self._queue.sort()
        return [key[2] for key in self._queue]

    def _fit(self, pod: DemandPod, free: Mapping[str, Mapping[str, list[ModelGi]]],
             offering: Iterable[ModelNode]) -> ModelNode | None:
        for node in offering:
            devices = free[node.name]
            if all(len(devices.get(r, ())) >= n for r, n in pod.requests.items()) and (
                pod.may_run_on(node.name, node.labels, ()) is None
            ):
                return node
        return None

    def advance(self, seconds: float) -> None:
        """Time passes: pods whose work is done leave, changes whose time is up end."""
        self.clock.advance(seconds)
        now = self.clock.wall()
        for name, running in list(self.running.items()):
            if now - running.started >= running.job.remaining_s:
                self._release(name)
        for node in self.nodes.values():
            if node.finish_change(now) and self.on_change is not None:
                self.on_change(node.name, node.layout)

    def _release(self, name: str) -> RunningPod:
        running = self.running.pop(name)
        for gi in running.devices:
            if gi.pod == name:
                gi.pod = None
        if running.pod.node_name in self.nodes:
            self.nodes[running.pod.node_name].version += 1
        return running

    # --- the rollout's port ---------------------------------------------------------------------------

    def _selected(self, selector: str) -> list[ModelNode]:
        matches = parse_equality(selector) if selector else None
        return [n for n in self.nodes.values() if matches is None or matches(n.view().labels)]

    def list_nodes(self, selector: str) -> list[NodeView]:
        return [node.view() for node in self._selected(selector)]

    def set_layout(self, node: NodeView, layout: str | None) -> NodeView:
        """As the rollout writes it: only while the Node is at the resourceVersion it was read at."""
        model = self.nodes[node.name]
        if model.view().resource_version != node.resource_version:
            raise NodeChangedError(f"node {node.name} changed since it was read")
        if layout is None:
            raise NotImplementedError("the model pool does not remove layout labels")
        now = self.clock.wall()
        previous = model.layout
        evicted, gpus_changed = model.start_change(self.layout, layout, done_at=now + self.reconfigure_s)
        self.relabels.append((now, node.name, layout))
        self.gpus_reconfigured += gpus_changed
        for name in evicted:
            running = self.running.pop(name)
            running.job.evictions += 1
            running.job.remaining_s = max(1.0, running.job.remaining_s - (now - running.started))
            self.submit(running.job)
        if self.on_change is not None:
            self.on_change(node.name, previous)
        return model.view()

    def list_pods_on_node(self, node: str) -> list[PodView]:
        return [
            PodView(ref=r.pod.ref, labels=r.pod.labels, owner_kinds=r.pod.owner_kinds, node_name=node,
                    phase="Running", gpu_resources=frozenset(r.pod.requests))
            for r in self.running.values() if r.pod.node_name == node
        ]

    def list_pdbs(self) -> list[PdbView]:
        return list(self.budgets)

    # --- the autopilot's port -------------------------------------------------------------------------

    def list_demand_nodes(self, selector: str) -> list[DemandNode]:
        return [DemandNode(node.view()) for node in self._selected(selector)]

    def list_gpu_pods(self) -> list[DemandPod]:
        return [pod for pod, _ in self.pending.values()] + [r.pod for r in self.running.values()]

    def read_layouts(self) -> str:
        return self.layouts

    def read_autopilot(self) -> StoredState | None:
        return self.read_object("autopilot")

    def write_autopilot(self, data: Mapping[str, str], resource_version: str) -> str:
        return self.write_object("autopilot", "autopilot", data, resource_version or None)

    def record_event(self, *, node: str | None, reason: str, message: str, warning: bool) -> None:
        self.events.append(RecordedEvent(node, reason, message, self.clock.wall()))

    def warn_node(self, node: NodeView, reason: str, message: str) -> None:
        self.record_event(node=node.name, reason=reason, message=message, warning=True)
