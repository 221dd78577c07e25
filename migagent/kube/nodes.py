"""Reads, watches and writes of our own Node: labels/annotations, cordon, the condition.

Writes are strategic-merge patches (a None value is sent as `null`, which deletes the key);
the condition goes through the status subresource, where conditions merge by `type`, so the
kubelet's own conditions are never touched.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import urllib3.exceptions
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from migagent.clock import Clock
from migagent.errors import TransientError
from migagent.kube.classify import call_with_retries, classified, classify
from migagent.kube.convert import node_view, rfc3339
from migagent.kube.core_v1 import CoreV1Calls
from migagent.kube.timeouts import RequestTimeout
from migagent.node.port import NodeChangedError, NodeEvent, NodeView, WatchExpired

_HTTP_GONE = 410
_HTTP_CONFLICT = 409


class NodeOps:
    def __init__(self, core: CoreV1Calls, *, node_name: str, clock: Clock, timeout: RequestTimeout) -> None:
        self._core = core
        self._node_name = node_name
        self._clock = clock
        self._timeout = timeout

    def get_node(self) -> NodeView:
        return call_with_retries(
            f"get node {self._node_name}", self._read_once, clock=self._clock, budget_s=self._timeout.call_budget
        )

    def _read_once(self) -> NodeView:
        with classified(f"get node {self._node_name}"):
            return node_view(self._core.read_node(self._node_name, _request_timeout=self._timeout.request))

    def watch_node(self, resource_version: str, timeout_s: float) -> Iterator[NodeEvent]:
        """Events for our Node after `resource_version`, until the server ends the stream.

        Raises WatchExpired when the server no longer has that version (list again, then watch).
        """
        return watch_nodes(
            self._core, f"watch node {self._node_name}", resource_version, timeout_s,
            field_selector=f"metadata.name={self._node_name}",
            request_timeout=self._timeout.watch(timeout_s),
        )

    def patch(self, body: dict[str, Any], *, call: str) -> NodeView:
        def send() -> NodeView:
            with classified(f"{call} on node {self._node_name}"):
                return node_view(self._core.patch_node(self._node_name, body, _request_timeout=self._timeout.request))

        return call_with_retries(call, send, clock=self._clock, budget_s=self._timeout.call_budget)

    def patch_metadata(
        self,
        *,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
        resource_version: str | None = None,
    ) -> NodeView:
        metadata: dict[str, Any] = {}
        if labels:
            metadata["labels"] = dict(labels)
        if annotations:
            metadata["annotations"] = dict(annotations)
        if not metadata:
            return self.get_node()
        if resource_version is not None:
            return self._patch_if_unchanged(metadata, resource_version)
        return self.patch({"metadata": metadata}, call="patch labels/annotations")

    def _patch_if_unchanged(self, metadata: dict[str, Any], resource_version: str) -> NodeView:
        """One patch with a resourceVersion precondition (the API server answers 409 when the Node moved
        on); never retried as is: the caller must read the Node again and decide afresh."""
        call = f"conditional patch of node {self._node_name} at resourceVersion {resource_version}"
        body = {"metadata": {**metadata, "resourceVersion": resource_version}}
        with classified(call):  # a NodeChangedError raised inside passes through unchanged
            try:
                return node_view(self._core.patch_node(self._node_name, body, _request_timeout=self._timeout.request))
            except ApiException as error:
                if error.status == _HTTP_CONFLICT:
                    raise NodeChangedError(f"{call}: the node changed since it was read") from error
                raise

    def set_unschedulable(
        self, unschedulable: bool, *, annotations: Mapping[str, str | None] | None = None
    ) -> NodeView:
        # One patch, so the cordon and the note saying who cordoned can never disagree.
        body: dict[str, Any] = {"spec": {"unschedulable": unschedulable}}
        if annotations:
            body["metadata"] = {"annotations": dict(annotations)}
        return self.patch(body, call="cordon" if unschedulable else "uncordon")

    def set_condition(self, condition_type: str, status: str, reason: str, message: str) -> NodeView:
        """Write one condition; lastTransitionTime moves only when the status flips."""

        def apply() -> NodeView:
            # Re-read on every try (once: the retries are this call's), so a retry never reuses a stale
            # transition time and never nests a second retry loop inside the first.
            node = self._read_once()
            current = node.condition(condition_type)
            if current is not None and (current.status, current.reason, current.message) == (status, reason, message):
                return node
            now = rfc3339(self._clock.wall())
            kept = current.last_transition_time if current is not None and current.status == status else None
            condition = {
                "type": condition_type,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": kept or now,
            }
            with classified(f"set condition {condition_type} on node {self._node_name}"):
                model = self._core.patch_node_status(
                    self._node_name, {"status": {"conditions": [condition]}}, _request_timeout=self._timeout.request
                )
            return node_view(model)

        return call_with_retries(
            f"set condition {condition_type}", apply, clock=self._clock, budget_s=self._timeout.call_budget
        )


def watch_nodes(
    core: CoreV1Calls,
    call: str,
    resource_version: str,
    timeout_s: float,
    *,
    request_timeout: tuple[float, float] | None = None,
    **selectors: str | None,
) -> Iterator[NodeEvent]:
    """Node events matching `selectors` (field_selector, label_selector) after `resource_version`.

    The server ends the stream after `timeout_s`; `request_timeout` (connect, read) bounds a silent one
    (default: the agent's default request timeout past that).

    Raises WatchExpired when the server no longer has that version (list again, then watch).
    """
    # The item type is named: CoreV1Calls.list_node carries no generated return annotation to find it by.
    stream = watch.Watch(return_type="V1Node").stream(  # type: ignore[no-untyped-call]
        core.list_node,
        **{name: value for name, value in selectors.items() if value},
        resource_version=resource_version,
        timeout_seconds=max(1, int(timeout_s)),
        allow_watch_bookmarks=True,
        _request_timeout=request_timeout or RequestTimeout().watch(timeout_s),
    )
    try:
        for event in stream:
            if event is None:
                continue
            yield _node_event(event, resource_version)
    except ApiException as error:
        if error.status == _HTTP_GONE:
            raise WatchExpired(f"{call}: resource version {resource_version} expired: {error.reason}") from error
        raise classify(error, call) from error
    except urllib3.exceptions.HTTPError as error:
        raise TransientError(f"{call}: stream broken: {error}") from error


def _node_event(event: Mapping[str, Any], fallback_rv: str) -> NodeEvent:
    kind = str(event["type"])
    if kind == "BOOKMARK":
        raw = event.get("raw_object") or {}
        rv = str((raw.get("metadata") or {}).get("resourceVersion") or fallback_rv)
        return NodeEvent(type=kind, node=None, resource_version=rv)
    view = node_view(event["object"])
    return NodeEvent(type=kind, node=view, resource_version=view.resource_version)
