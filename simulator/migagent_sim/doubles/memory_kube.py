"""An in-memory `KubePort`: one Node and the pods on it, no HTTP and no threads.

The middle test level (kopf's "mock at our own API wrapper"): `NodeReconcile`, the change window
and the drainer run against it in milliseconds. It refuses what the API server refuses where the
agent relies on it, with the errors `KubeApi` raises for those answers:
* a conditional write at a stale resourceVersion: `NodeChangedError` (HTTP 409), nothing written;
* a Node that does not exist: `PermanentError` naming HTTP 404, on every read and write;
* an eviction a PodDisruptionBudget refuses: `BLOCKED` (HTTP 429) naming it, or naming none for a pod
  in `refusals` (its next evictions refused); of a pod that is gone: `GONE`; of a pod in
  `stuck_terminating`: accepted, and the pod stays Terminating past its grace period. An evicted pod
  stays listed, Terminating, for `terminating_lists` lists of the node's pods; one in `replaced` is
  replaced at once by its controller under the same name (another UID), as a StatefulSet's is.
Every write bumps the resourceVersion. `fail(call, error, times)` makes the next calls of one port
method raise; `advertise` stands for the kubelet: when the device plugin's deploy label goes back
to `true`, Node allocatable becomes what it returns (the plugin re-enumerated the GPUs).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from migagent.errors import MigAgentError, PermanentError
from migagent.node.budgets import PdbView, guarding
from migagent.node.names import PAUSED_FOR_MIG_CHANGE, deploy_label, is_gpu_resource
from migagent.node.port import (
    EvictionOutcome,
    EvictionStatus,
    NodeChangedError,
    NodeCondition,
    NodeEvent,
    NodeView,
    PodRef,
    PodView,
)

DEVICE_PLUGIN_LABEL = deploy_label("device-plugin")


@dataclass(frozen=True)
class RecordedEvent:
    reason: str
    message: str
    warning: bool


@dataclass
class MemoryKube:
    """Implements `migagent.node.port.KubePort` (and so every narrower port of migagent.kube)."""

    node_name: str = "gpu-node-1"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)
    unschedulable: bool = False
    conditions: dict[str, NodeCondition] = field(default_factory=dict)
    pods: dict[PodRef, PodView] = field(default_factory=dict)
    pdbs: list[PdbView] = field(default_factory=list)
    advertise: Callable[[], Mapping[str, int]] | None = None
    exists: bool = True
    events: list[RecordedEvent] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    """Every accepted write, in order, as "<call> <detail>" (cordon, uncordon, labels {...}, ...)."""
    evictions: list[PodRef] = field(default_factory=list)
    stuck_terminating: set[PodRef] = field(default_factory=set)
    """Pods an eviction leaves Terminating for ever (a finalizer, a hung container): past their grace period."""
    refusals: dict[PodRef, int] = field(default_factory=dict)
    """How many more evictions of a pod a 429 naming no budget refuses (-1: every one)."""
    replaced: set[PodRef] = field(default_factory=set)
    terminating_lists: int = 0
    _leaving: dict[PodRef, int] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    """Every call made to the port, reads included, in order ("get_node", "list_pods_on_node", ...)."""
    _faults: dict[str, list[MigAgentError]] = field(default_factory=dict)
    _versions: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    resource_version: str = "1"

    def __post_init__(self) -> None:
        self.resource_version = str(next(self._versions))

    # -- test controls --------------------------------------------------------------------------

    def fail(self, call: str, error: MigAgentError, *, times: int = 1) -> None:
        """The next `times` calls of the port method `call` raise `error` (nothing is done)."""
        self._faults.setdefault(call, []).extend([error] * times)

    def add_pod(self, pod: PodView) -> None:
        self.pods[pod.ref] = pod

    def set_label_for_test(self, key: str, value: str | None) -> None:
        """An admin's (or the GPU Operator's) write: bumps the resourceVersion like any write."""
        self._set(self.labels, {key: value})
        self._bump()

    @property
    def cordon_episodes(self) -> int:
        return sum(1 for w in self.writes if w == "cordon")

    # -- KubePort: the Node ---------------------------------------------------------------------

    def get_node(self) -> NodeView:
        self._enter("get_node")
        return self._view()

    def watch_node(self, resource_version: str, timeout_s: float) -> Iterator[NodeEvent]:
        self._enter("watch_node")
        return iter(())  # no thread sees a stream here: the caller lists again, as after a server timeout

    def patch_metadata(
        self,
        *,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
        resource_version: str | None = None,
    ) -> NodeView:
        self._enter("patch_metadata")
        if resource_version is not None and resource_version != self.resource_version:
            raise NodeChangedError(
                f"conditional patch of node {self.node_name} at resourceVersion {resource_version}: HTTP 409:"
                f" the object has been modified (now {self.resource_version})"
            )
        return self._write_metadata(labels, annotations)

    def set_unschedulable(
        self, unschedulable: bool, *, annotations: Mapping[str, str | None] | None = None
    ) -> NodeView:
        self._enter("set_unschedulable")
        self.unschedulable = unschedulable
        self._set(self.annotations, annotations or {})
        self.writes.append("cordon" if unschedulable else "uncordon")
        return self._bump()

    def set_condition(self, condition_type: str, status: str, reason: str, message: str) -> NodeView:
        self._enter("set_condition")
        self.conditions[condition_type] = NodeCondition(condition_type, status, reason, message)
        self.writes.append(f"condition {status} {reason}")
        return self._bump()

    def emit_event(self, reason: str, message: str, *, warning: bool) -> None:
        self._enter("emit_event")
        self.events.append(RecordedEvent(reason, message, warning))

    # -- KubePort: pods and budgets -------------------------------------------------------------

    def list_pods_on_node(self, *, label_selector: str | None = None, namespace: str | None = None) -> list[PodView]:
        self._enter("list_pods_on_node")
        wanted = dict(term.split("=", 1) for term in label_selector.split(",")) if label_selector else {}
        listed = [
            pod
            for pod in self.pods.values()
            if (namespace is None or pod.ref.namespace == namespace)
            and all(pod.labels.get(k) == v for k, v in wanted.items())
        ]
        for ref, left in list(self._leaving.items()):  # each list brings a Terminating pod nearer its end
            self._leaving[ref] = left - 1
            if left <= 1:
                del self._leaving[ref], self.pods[ref]
        return listed

    def read_pod(self, ref: PodRef) -> PodView | None:
        self._enter("read_pod")
        return next((p for p in self.pods.values() if (p.ref.namespace, p.ref.name) == (ref.namespace, ref.name)), None)

    def evict(self, ref: PodRef) -> EvictionOutcome:
        self._enter("evict")
        self.evictions.append(ref)
        pod = self.pods.get(ref)
        if pod is None:
            return EvictionOutcome(EvictionStatus.GONE, f"pod {ref} not found")
        blocking = [b.name for b in guarding(self.pdbs, ref.namespace, pod.labels) if b.disruptions_allowed == 0]
        refused = self.refusals.get(ref, 0)
        if blocking or refused:
            self.refusals[ref] = refused - 1 if refused > 0 else refused
            return EvictionOutcome(
                EvictionStatus.BLOCKED, "Cannot evict pod as it would violate the pod's disruption budget.",
                budgets=tuple(blocking),
            )
        if ref in self.stuck_terminating:  # deletionTimestamp set long ago; the kubelet never finishes it
            self.pods[ref] = replace(pod, deleting=True, deletion_deadline=0.0)
        elif self.terminating_lists:
            self.pods[ref] = replace(pod, deleting=True)
            self._leaving[ref] = self.terminating_lists
        else:
            del self.pods[ref]
        if ref in self.replaced:
            new = PodRef(ref.namespace, ref.name, f"{ref.uid}-replacement")
            self.pods[new] = replace(pod, ref=new)
        return EvictionOutcome(EvictionStatus.EVICTED, f"pod {ref} evicted")

    def delete_pod(self, ref: PodRef, *, grace_period_s: int | None = None) -> None:
        self._enter("delete_pod")
        self.pods.pop(ref, None)

    def list_pdbs(self, namespace: str) -> list[PdbView]:
        self._enter("list_pdbs")
        return [b for b in self.pdbs if b.namespace == namespace]

    # -- inside ---------------------------------------------------------------------------------

    def _enter(self, call: str) -> None:
        self.calls.append(call)
        queued = self._faults.get(call)
        if queued:
            raise queued.pop(0)
        if not self.exists:
            raise PermanentError(f"{call} on node {self.node_name}: HTTP 404: nodes \"{self.node_name}\" not found")

    def _write_metadata(
        self, labels: Mapping[str, str | None] | None, annotations: Mapping[str, str | None] | None
    ) -> NodeView:
        resumed = self.labels.get(DEVICE_PLUGIN_LABEL) == PAUSED_FOR_MIG_CHANGE and (labels or {}).get(
            DEVICE_PLUGIN_LABEL
        ) not in (None, PAUSED_FOR_MIG_CHANGE)
        self._set(self.labels, labels or {})
        self._set(self.annotations, annotations or {})
        if labels:
            self.writes.append(f"labels {dict(labels)}")
        if annotations:
            self.writes.append(f"annotations {sorted(annotations)}")
        if resumed and self.advertise is not None:  # the plugin starts again and enumerates the GPUs
            kept = {k: v for k, v in self.allocatable.items() if not is_gpu_resource(k)}
            self.allocatable = {**kept, **self.advertise()}
        return self._bump()

    @staticmethod
    def _set(target: dict[str, str], changes: Mapping[str, str | None]) -> None:
        for key, value in changes.items():
            if value is None:
                target.pop(key, None)
            else:
                target[key] = value

    def _bump(self) -> NodeView:
        self.resource_version = str(next(self._versions))
        return self._view()

    def _view(self) -> NodeView:
        return NodeView(
            name=self.node_name,
            uid=f"uid-{self.node_name}",
            resource_version=self.resource_version,
            labels=dict(self.labels),
            annotations=dict(self.annotations),
            unschedulable=self.unschedulable,
            allocatable=dict(self.allocatable),
            capacity=dict(self.allocatable),
            conditions=tuple(self.conditions.values()),
        )

