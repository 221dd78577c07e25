"""PodDisruptionBudgets that guard the pods a drain would evict: which one selects a pod, and whether
it can ever allow an eviction.

A budget with `maxUnavailable: 0` (or a percentage of `status.expectedPods` that rounds to 0) or a
`minAvailable` equal to every pod it expects (an int at least `expectedPods`, or a percentage that
rounds up to all of them: 50% of a single pod is that pod) refuses every eviction for as long as it
exists: waiting out the drain timeout only cordons and pauses the node for nothing. Percentages are
scaled as the disruption controller does (GetScaledValueFromIntOrPercent, rounding up). With
`unhealthyPodEvictionPolicy: AlwaysAllow` a pod that is not Ready may always be evicted. One with
`disruptionsAllowed: 0` for now (a replacement not Ready yet) is a wait, not a refusal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


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
    unhealthy_pod_eviction_policy: str | None = None
    """`IfHealthyBudget` (the default when unset) or `AlwaysAllow`."""

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if namespace != self.namespace or self.match_labels is None:
            return False
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )

    def never_allows(self, *, pod_ready: bool = True) -> str | None:
        """Why no eviction of a pod (Ready or not) can ever pass this budget as it stands, or None when one may."""
        if not pod_ready and self.unhealthy_pod_eviction_policy == "AlwaysAllow":
            return None  # an unhealthy pod is evicted whatever the budget says
        name = f"PodDisruptionBudget {self.namespace}/{self.name}"
        if self.max_unavailable in (0, "0%"):
            return f"{name} has maxUnavailable: {self.max_unavailable}"
        if self.min_available == "100%":
            return f"{name} has minAvailable: 100%"
        return self._min_available_never_allows(name)

    def _min_available_never_allows(self, name: str) -> str | None:
        expected = self.expected_pods
        if expected is None or self.min_available is None:
            return None
        needed = _scaled(self.min_available, expected) if isinstance(self.min_available, str) else self.min_available
        if needed is None or needed < expected:
            return None
        shown = f"{self.min_available} ({needed} pod(s))" if isinstance(self.min_available, str) else needed
        return f"{name} has minAvailable: {shown} with {expected} pod(s) expected"


def _scaled(percent: str, expected: int) -> int | None:
    """A percentage of `expected`, rounded up (intstr.GetScaledValueFromIntOrPercent(..., true)); None if not one."""
    if not percent.endswith("%") or not percent[:-1].isdigit():
        return None
    return math.ceil(int(percent[:-1]) * expected / 100)


def guarding(budgets: Sequence[PdbView], namespace: str, labels: Mapping[str, str]) -> list[PdbView]:
    return [budget for budget in budgets if budget.selects(namespace, labels)]
