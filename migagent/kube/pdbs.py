"""PodDisruptionBudgets that guard the pods a drain would evict: which one selects a pod, and whether
it can ever allow an eviction.

A budget with `maxUnavailable: 0` (or 0%) or a `minAvailable` equal to every pod it expects (an int
at least `status.expectedPods`, or 100%) refuses every eviction for as long as it exists: waiting
out the drain timeout only cordons and pauses the node for nothing. One with `disruptionsAllowed: 0`
for now (a replacement not Ready yet) is a wait, not a refusal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubernetes.client import PolicyV1Api, V1LabelSelector, V1PodDisruptionBudget

from migagent.clock import Clock
from migagent.kube.classify import call_with_retries, classified
from migagent.kube.timeouts import RequestTimeout


@dataclass(frozen=True)
class SelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        match self.operator:
            case "In":
                return labels.get(self.key) in self.values
            case "NotIn":
                return self.key not in labels or labels[self.key] not in self.values
            case "Exists":
                return self.key in labels
            case "DoesNotExist":
                return self.key not in labels
        return False  # an operator the API server would not have accepted: select nothing


@dataclass(frozen=True)
class PdbView:
    namespace: str
    name: str
    match_labels: Mapping[str, str] | None = field(default=None, hash=False)
    """None: no selector at all (policy/v1: selects no pod)."""
    match_expressions: tuple[SelectorRequirement, ...] = ()
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    expected_pods: int | None = None
    disruptions_allowed: int | None = None

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if namespace != self.namespace or self.match_labels is None:
            return False
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )

    def never_allows(self) -> str | None:
        """Why no eviction can ever pass this budget as it stands, or None when one may."""
        if self.max_unavailable in (0, "0%"):
            return f"PodDisruptionBudget {self.namespace}/{self.name} has maxUnavailable: {self.max_unavailable}"
        if self.min_available == "100%":
            return f"PodDisruptionBudget {self.namespace}/{self.name} has minAvailable: 100%"
        expected = self.expected_pods
        if isinstance(self.min_available, int) and expected is not None and self.min_available >= expected:
            return (
                f"PodDisruptionBudget {self.namespace}/{self.name} has minAvailable: {self.min_available}"
                f" with {expected} pod(s) expected"
            )
        return None


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


def guarding(budgets: Sequence[PdbView], namespace: str, labels: Mapping[str, str]) -> list[PdbView]:
    return [budget for budget in budgets if budget.selects(namespace, labels)]
