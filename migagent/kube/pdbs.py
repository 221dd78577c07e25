"""PodDisruptionBudgets read from the API server as the typed `node.budgets.PdbView`."""

from __future__ import annotations

from collections.abc import Mapping

from kubernetes.client import PolicyV1Api, V1LabelSelector, V1PodDisruptionBudget

from migagent.clock import Clock
from migagent.kube.classify import call_with_retries, classified
from migagent.kube.timeouts import RequestTimeout
from migagent.node.budgets import PdbView, SelectorRequirement


def _int_or_string(value: object) -> int | str | None:
    if value is None or isinstance(value, int):
        return value
    text = str(value)
    return int(text) if text.isdigit() else text


def _selector(selector: V1LabelSelector | None) -> tuple[Mapping[str, str] | None, tuple[SelectorRequirement, ...]]:
    if selector is None:
        return None, ()
    expressions = tuple(
        SelectorRequirement(r.key, r.operator, tuple(r.values or ())) for r in (selector.match_expressions or ())
    )
    return dict(selector.match_labels or {}), expressions


def pdb_view(model: V1PodDisruptionBudget) -> PdbView:
    meta, spec, status = model.metadata, model.spec, model.status
    labels, expressions = _selector(spec.selector if spec else None)
    return PdbView(
        namespace=(meta.namespace if meta else None) or "",
        name=(meta.name if meta else None) or "",
        match_labels=labels,
        match_expressions=expressions,
        min_available=_int_or_string(spec.min_available if spec else None),
        max_unavailable=_int_or_string(spec.max_unavailable if spec else None),
        expected_pods=status.expected_pods if status else None,
        disruptions_allowed=status.disruptions_allowed if status else None,
        unhealthy_pod_eviction_policy=(spec.unhealthy_pod_eviction_policy if spec else None),
    )


class PdbOps:
    def __init__(self, policy: PolicyV1Api, *, clock: Clock, timeout: RequestTimeout) -> None:
        self._policy = policy
        self._clock = clock
        self._timeout = timeout

    def list_pdbs(self, namespace: str) -> list[PdbView]:
        call = f"list poddisruptionbudgets in namespace {namespace}"

        def read() -> list[PdbView]:
            with classified(call):
                budgets = self._policy.list_namespaced_pod_disruption_budget(
                    namespace, _request_timeout=self._timeout.request
                )
            return [pdb_view(budget) for budget in budgets.items]

        return call_with_retries(call, read, clock=self._clock, budget_s=self._timeout.call_budget)
