"""Pods on our node: list, read, evict (Eviction API), delete, and the PDBs that guard them."""

from __future__ import annotations

import json

from kubernetes.client import (
    CoreV1Api,
    PolicyV1Api,
    V1DeleteOptions,
    V1Eviction,
    V1ObjectMeta,
    V1Preconditions,
)
from kubernetes.client.exceptions import ApiException

from migagent.clock import Clock
from migagent.kube.classify import call_with_retries, classified, retry_after_s, status_message
from migagent.kube.convert import pod_view, selector_matches
from migagent.kube.port import EvictionOutcome, EvictionStatus, PodRef, PodView

_HTTP_NOT_FOUND = 404
_HTTP_TOO_MANY_REQUESTS = 429


class PodOps:
    def __init__(self, core: CoreV1Api, policy: PolicyV1Api, *, node_name: str, clock: Clock) -> None:
        self._core = core
        self._policy = policy
        self._node_name = node_name
        self._clock = clock

    def list_pods_on_node(self, *, label_selector: str | None = None, namespace: str | None = None) -> list[PodView]:
        field_selector = f"spec.nodeName={self._node_name}"
        where = f"in namespace {namespace}" if namespace else "in all namespaces"
        call = f"list pods on node {self._node_name} {where}"

        def read() -> list[PodView]:
            with classified(call):
                if namespace is None:
                    pods = self._core.list_pod_for_all_namespaces(
                        field_selector=field_selector, label_selector=label_selector
                    )
                else:
                    pods = self._core.list_namespaced_pod(
                        namespace, field_selector=field_selector, label_selector=label_selector
                    )
            return [pod_view(pod) for pod in pods.items]

        return call_with_retries(call, read, clock=self._clock)

    def read_pod(self, ref: PodRef) -> PodView | None:
        """The pod with that namespace/name now (its uid may differ from ref's), or None when gone."""
        call = f"read pod {ref}"

        def read() -> PodView | None:
            with classified(call):
                try:
                    return pod_view(self._core.read_namespaced_pod(ref.name, ref.namespace))
                except ApiException as error:
                    if error.status == _HTTP_NOT_FOUND:
                        return None
                    raise

        return call_with_retries(call, read, clock=self._clock)

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
                self._core.create_namespaced_pod_eviction(ref.name, ref.namespace, body)
            except ApiException as error:
                if error.status == _HTTP_NOT_FOUND:
                    return EvictionOutcome(EvictionStatus.GONE, f"pod {ref} not found")
                if error.status == _HTTP_TOO_MANY_REQUESTS:
                    return EvictionOutcome(EvictionStatus.BLOCKED, _blocked_message(error), retry_after_s(error))
                raise
        return EvictionOutcome(EvictionStatus.EVICTED, f"pod {ref} evicted")

    def delete_pod(self, ref: PodRef, *, grace_period_s: int | None = None) -> None:
        """Delete the pod (a missing pod counts as deleted). Bypasses PodDisruptionBudgets."""
        call = f"delete pod {ref}"
        options = V1DeleteOptions(preconditions=V1Preconditions(uid=ref.uid)) if ref.uid else None

        def send() -> None:
            with classified(call):
                try:
                    self._core.delete_namespaced_pod(
                        ref.name, ref.namespace, grace_period_seconds=grace_period_s, body=options
                    )
                except ApiException as error:
                    if error.status != _HTTP_NOT_FOUND:
                        raise

        call_with_retries(call, send, clock=self._clock)

    def list_pdbs_matching(self, pod: PodView) -> list[str]:
        """Names of the PodDisruptionBudgets in the pod's namespace whose selector matches it."""
        call = f"list PodDisruptionBudgets in namespace {pod.ref.namespace}"

        def read() -> list[str]:
            with classified(call):
                budgets = self._policy.list_namespaced_pod_disruption_budget(pod.ref.namespace)
            return sorted(
                budget.metadata.name
                for budget in budgets.items
                if budget.metadata is not None
                and budget.metadata.name
                and budget.spec is not None
                and selector_matches(budget.spec.selector, pod.labels)
            )

        return call_with_retries(call, read, clock=self._clock)


def _blocked_message(error: ApiException) -> str:
    """The server's reason plus its causes ("The disruption budget X needs N healthy pods...")."""
    message = status_message(error)
    try:
        decoded = json.loads(error.body or "")
    except ValueError:
        return message
    causes = (decoded.get("details") or {}).get("causes") or [] if isinstance(decoded, dict) else []
    details = [str(c["message"]) for c in causes if isinstance(c, dict) and c.get("message")]
    return " ".join([message, *details])
