"""Pods on our node: list, find one by name, evict (Eviction API), delete.

Everything here needs only `list`, `create pods/eviction` and (standalone overlay) `delete` on pods:
one pod is found by listing with a `metadata.name` field selector rather than read with GET, and the
PodDisruptionBudget that refuses an eviction is named from the 429 the API server sends, not listed.
"""

from __future__ import annotations

import re
from typing import Any

from kubernetes.client import (
    V1DeleteOptions,
    V1Eviction,
    V1ObjectMeta,
    V1Preconditions,
)
from kubernetes.client.exceptions import ApiException

from migagent.clock import Clock
from migagent.jsontext import decode_json
from migagent.kube.classify import call_with_retries, classified, retry_after_s, status_message
from migagent.kube.convert import pod_view
from migagent.kube.core_v1 import CoreV1Calls
from migagent.kube.timeouts import RequestTimeout
from migagent.node.port import EvictionOutcome, EvictionStatus, PodRef, PodView

_HTTP_NOT_FOUND = 404
_HTTP_CONFLICT = 409
_HTTP_TOO_MANY_REQUESTS = 429
# The eviction subresource's 429 causes (pkg/registry/core/pod/storage/eviction.go): a StatusCause
# whose `reason` (Go field Type) is DisruptionBudget and whose message starts with the budget's name.
_DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
_BUDGET_NAME = re.compile(r"^The disruption budget (\S+) ")


class PodOps:
    def __init__(self, core: CoreV1Calls, *, node_name: str, clock: Clock, timeout: RequestTimeout) -> None:
        self._core = core
        self._node_name = node_name
        self._clock = clock
        self._timeout = timeout

    def list_pods_on_node(self, *, label_selector: str | None = None, namespace: str | None = None) -> list[PodView]:
        field_selector = f"spec.nodeName={self._node_name}"
        where = f"in namespace {namespace}" if namespace else "in all namespaces"
        call = f"list pods on node {self._node_name} {where}"

        def read() -> list[PodView]:
            with classified(call):
                if namespace is None:
                    pods = self._core.list_pod_for_all_namespaces(
                        field_selector=field_selector,
                        label_selector=label_selector,
                        _request_timeout=self._timeout.request,
                    )
                else:
                    pods = self._core.list_namespaced_pod(
                        namespace,
                        field_selector=field_selector,
                        label_selector=label_selector,
                        _request_timeout=self._timeout.request,
                    )
            return [pod_view(pod) for pod in pods.items]

        return call_with_retries(call, read, clock=self._clock, budget_s=self._timeout.call_budget)

    def read_pod(self, ref: PodRef) -> PodView | None:
        """The pod with that namespace/name now (its uid may differ from ref's), or None when gone.

        A list with a `metadata.name` field selector, not a GET: the agent's RBAC grants `list` on
        pods and nothing more, and an absent pod is simply an empty list."""
        call = f"find pod {ref}"

        def find() -> PodView | None:
            with classified(call):
                pods = self._core.list_namespaced_pod(
                    ref.namespace, field_selector=f"metadata.name={ref.name}", _request_timeout=self._timeout.request
                )
            return next((pod_view(pod) for pod in pods.items), None)

        return call_with_retries(call, find, clock=self._clock, budget_s=self._timeout.call_budget)

    def evict(self, ref: PodRef) -> EvictionOutcome:
        """One eviction request: EVICTED, BLOCKED (429, e.g. a PDB) or GONE (404); other errors raise."""
        body = V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=V1ObjectMeta(name=ref.name, namespace=ref.namespace),
            # The uid precondition keeps a same-named replacement (StatefulSet) from being evicted.
            delete_options=V1DeleteOptions(preconditions=V1Preconditions(uid=ref.uid)) if ref.uid else None,
        )
        with classified(f"evict pod {ref}"):
            try:
                self._core.create_namespaced_pod_eviction(
                    ref.name, ref.namespace, body, _request_timeout=self._timeout.request
                )
            except ApiException as error:
                if error.status == _HTTP_NOT_FOUND:
                    return EvictionOutcome(EvictionStatus.GONE, f"pod {ref} not found")
                if error.status == _HTTP_TOO_MANY_REQUESTS:
                    return eviction_refusal(error)
                if error.status == _HTTP_CONFLICT and self._replaced(ref):
                    return EvictionOutcome(EvictionStatus.GONE, f"pod {ref} was replaced (another uid)")
                raise
        return EvictionOutcome(EvictionStatus.EVICTED, f"pod {ref} evicted")

    def _replaced(self, ref: PodRef) -> bool:
        """After a 409 on a uid precondition: the pod we meant is gone (absent, or a same-named successor)."""
        if not ref.uid:
            return False
        current = self.read_pod(ref)
        return current is None or current.ref.uid != ref.uid

    def delete_pod(self, ref: PodRef, *, grace_period_s: int | None = None) -> None:
        """Delete the pod (a missing pod counts as deleted). Bypasses PodDisruptionBudgets."""
        call = f"delete pod {ref}"
        options = V1DeleteOptions(preconditions=V1Preconditions(uid=ref.uid)) if ref.uid else None

        def send() -> None:
            with classified(call):
                try:
                    self._core.delete_namespaced_pod(
                        ref.name,
                        ref.namespace,
                        grace_period_seconds=grace_period_s,
                        body=options,
                        _request_timeout=self._timeout.request,
                    )
                except ApiException as error:
                    if error.status == _HTTP_CONFLICT and self._replaced(ref):
                        return  # the uid precondition failed: that pod is gone, its successor is not ours
                    if error.status != _HTTP_NOT_FOUND:
                        raise

        call_with_retries(call, send, clock=self._clock, budget_s=self._timeout.call_budget)


def eviction_refusal(error: ApiException) -> EvictionOutcome:
    """A 429: the server's reason plus its causes ("The disruption budget X needs N healthy pods..."),
    and the names of the PodDisruptionBudgets those causes mention."""
    causes = _status_causes(error)
    details = [str(cause["message"]) for cause in causes if cause.get("message")]
    budgets = tuple(
        dict.fromkeys(
            match.group(1)
            for cause in causes
            if cause.get("reason") == _DISRUPTION_BUDGET_CAUSE
            and (match := _BUDGET_NAME.match(str(cause.get("message") or "")))
        )
    )
    return EvictionOutcome(
        EvictionStatus.BLOCKED,
        " ".join([status_message(error), *details]),
        retry_after_s(error),
        budgets=budgets,
    )


def _status_causes(error: ApiException) -> list[dict[str, Any]]:
    """`details.causes` of the Status in the error's body; empty when the body is not such a Status."""
    try:
        decoded = decode_json(error.body or "")
    except ValueError:
        return []
    details = decoded.get("details") if isinstance(decoded, dict) else None
    causes = details.get("causes") if isinstance(details, dict) else None
    return [cause for cause in causes if isinstance(cause, dict)] if isinstance(causes, list) else []
