"""Typed values at the Kubernetes boundary, and the port the rest of migagent talks to.

Nothing outside migagent.kube sees a `kubernetes` model: `KubeApi` turns them into these frozen
values, and code that needs a test double of the cluster implements `KubePort`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from migagent.errors import TransientError
from migagent.node.budgets import PdbView


@dataclass(frozen=True)
class NodeCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    """RFC 3339, as the API server stores it."""


@dataclass(frozen=True)
class NodeView:
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    annotations: Mapping[str, str] = field(default_factory=dict, hash=False)
    unschedulable: bool = False
    allocatable: Mapping[str, int] = field(default_factory=dict, hash=False)
    """Whole-number quantities (extended resources are always whole); fractional ones are floored."""
    capacity: Mapping[str, int] = field(default_factory=dict, hash=False)
    conditions: tuple[NodeCondition, ...] = ()

    def condition(self, condition_type: str) -> NodeCondition | None:
        return next((c for c in self.conditions if c.type == condition_type), None)


@dataclass(frozen=True, order=True)
class PodRef:
    namespace: str
    name: str
    uid: str = ""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PodView:
    ref: PodRef
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    owner_kinds: tuple[str, ...] = ()
    owner_names: tuple[str, ...] = ()
    """Names of the owning controllers (a DaemonSet's name tells apart pods that share labels)."""
    is_mirror: bool = False
    node_name: str = ""
    phase: str = ""
    deleting: bool = False
    gpu_resources: frozenset[str] = frozenset()
    """`nvidia.com/gpu` / `nvidia.com/mig-*` names any container requests or limits."""
    ready: bool = True
    """The pod's Ready condition (a PDB's unhealthyPodEvictionPolicy treats unready pods apart)."""
    empty_dir_volumes: tuple[str, ...] = ()
    """Names of its emptyDir volumes: an eviction deletes their data (kubectl drain's --delete-emptydir-data)."""
    deletion_deadline: float | None = None
    """While Terminating: `deletionTimestamp` (wall seconds), when its grace period is over."""

    @property
    def is_daemonset_pod(self) -> bool:
        return "DaemonSet" in self.owner_kinds

    @property
    def is_finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


class EvictionStatus(enum.Enum):
    EVICTED = "evicted"
    """The API server accepted the eviction; the pod is terminating."""
    BLOCKED = "blocked"
    """Refused for now (a PodDisruptionBudget allows no disruption): try again later."""
    GONE = "gone"
    """The pod no longer exists (or was replaced): nothing to do."""


@dataclass(frozen=True)
class EvictionOutcome:
    status: EvictionStatus
    message: str = ""
    retry_after_s: float | None = None
    """The server's Retry-After, when it sent one."""
    budgets: tuple[str, ...] = ()
    """BLOCKED: the PodDisruptionBudgets the server named as refusing it (empty when it named none)."""


@dataclass(frozen=True)
class NodeEvent:
    """One watch event for our Node. BOOKMARK events carry only a resource version."""

    type: str
    node: NodeView | None
    resource_version: str


class WatchExpired(TransientError):  # noqa: N818 - the contract names it so
    """The watch's resource version is older than the server keeps (HTTP 410): list again, then watch."""

    def __init__(self, message: str) -> None:
        super().__init__(message, delay=0.0)


class NodeChangedError(TransientError):
    """A conditional write (resourceVersion precondition) found the Node changed since it was read (409)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, delay=0.0)


class KubePort(Protocol):
    """What migagent needs from the API server, about its own Node and the pods on it."""

    @property
    def node_name(self) -> str: ...

    def get_node(self) -> NodeView: ...

    def watch_node(self, resource_version: str, timeout_s: float) -> Iterator[NodeEvent]: ...

    def patch_metadata(
        self,
        *,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
        resource_version: str | None = None,
    ) -> NodeView: ...

    def set_unschedulable(
        self, unschedulable: bool, *, annotations: Mapping[str, str | None] | None = None
    ) -> NodeView: ...

    def set_condition(self, condition_type: str, status: str, reason: str, message: str) -> NodeView: ...

    def emit_event(self, reason: str, message: str, *, warning: bool) -> None: ...

    def list_pods_on_node(
        self, *, label_selector: str | None = None, namespace: str | None = None
    ) -> list[PodView]: ...

    def read_pod(self, ref: PodRef) -> PodView | None: ...

    def evict(self, ref: PodRef) -> EvictionOutcome: ...

    def delete_pod(self, ref: PodRef, *, grace_period_s: int | None = None) -> None: ...

    def list_pdbs(self, namespace: str) -> list[PdbView]: ...
