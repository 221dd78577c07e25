"""The moment an attempt first writes to the cluster: the node's Lease must be held from there on.

An attempt reads freely (the Node from the watch, NVML, the layout file) without the Lease; most of
them, on a settled node, end there having written nothing. `FirstWriteGuard` wraps the attempt's
KubePort: the first write (a status patch, a label, a cordon, an Event) calls the attempt's
`before_first_write` once, which raises `LeaseNeeded` when this process does not hold the Lease
(loops.ownership then claims it and runs the attempt again from fresh reads) and runs the checks
that must precede any write (the sole-owner check).

`LeaseNeeded` is a BaseException: it must leave the attempt untouched by its `except Exception`
undo, since nothing has been written yet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from migagent.node.port import EvictionOutcome, KubePort, NodeView, PodRef, PodView


class LeaseNeeded(BaseException):
    """The attempt is about to write and this process does not hold the node's Lease."""


class WritePermit:
    """Whether an attempt may write: the Lease held (else LeaseNeeded), then the sole-owner check, once."""

    def __init__(
        self, may_write: Callable[[], bool] | None, sole_owner: Callable[[Sequence[PodView] | None], None]
    ) -> None:
        """`may_write`: whether this process holds the Lease now (None: no Lease in play, e.g. tests
        driving NodeReconcile alone); `sole_owner`: raises when another MIG manager owns the node."""
        self._may_write = may_write
        self._sole_owner = sole_owner
        self._granted = False

    @property
    def leased(self) -> bool:
        return self._may_write is None or self._may_write()

    def require_lease(self) -> None:
        if not self.leased:
            raise LeaseNeeded("this attempt writes: the node's Lease first")

    def grant(self, pods: Sequence[PodView] | None = None) -> None:
        """Before the attempt's first write (`pods`: the node's pods, when listed already)."""
        self.require_lease()
        if not self._granted:
            self._granted = True  # first: a failure report written after a refusal needs no second check
            self._sole_owner(pods)


class FirstWriteGuard:
    """A KubePort whose first write runs `before_first_write` (once; it may raise). Each write of the port
    is written out here (tests/unit/test_architecture_doc.py checks it): a new one passed through
    unguarded would write before the Lease."""

    def __init__(self, api: KubePort, before_first_write: Callable[[], None]) -> None:
        self._api = api
        self._before = before_first_write
        self._written = False

    def _write(self) -> None:
        if not self._written:
            self._before()
            self._written = True

    def __getattr__(self, read: str) -> Any:
        """The port's reads (get_node, list_pods_on_node, ...) pass through; every write is below."""
        return getattr(self._api, read)

    # -- writes -------------------------------------------------------------------------------

    def patch_metadata(
        self,
        *,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
        resource_version: str | None = None,
    ) -> NodeView:
        self._write()
        return self._api.patch_metadata(labels=labels, annotations=annotations, resource_version=resource_version)

    def set_unschedulable(
        self, unschedulable: bool, *, annotations: Mapping[str, str | None] | None = None
    ) -> NodeView:
        self._write()
        return self._api.set_unschedulable(unschedulable, annotations=annotations)

    def set_condition(self, condition_type: str, status: str, reason: str, message: str) -> NodeView:
        self._write()
        return self._api.set_condition(condition_type, status, reason, message)

    def emit_event(self, reason: str, message: str, *, warning: bool) -> None:
        self._write()
        self._api.emit_event(reason, message, warning=warning)

    def evict(self, ref: PodRef) -> EvictionOutcome:
        self._write()
        return self._api.evict(ref)

    def delete_pod(self, ref: PodRef, *, grace_period_s: int | None = None) -> None:
        self._write()
        self._api.delete_pod(ref, grace_period_s=grace_period_s)
