"""A small disruption controller: recomputes the status of the PDBs it manages whenever their pods change.

As pkg/controller/disruption does for a budget with an integer minAvailable, or maxUnavailable with
the controller's replica count given: currentHealthy counts the selected pods that are Ready, not
Terminating and not in status.disruptedPods (evicted, not yet gone); desiredHealthy is minAvailable
(or replicas - maxUnavailable); disruptionsAllowed = max(0, currentHealthy - desiredHealthy). So an
eviction's decrement holds while the evicted pod terminates, and comes back when a replacement is
Ready. Budgets added otherwise keep the status tests set.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from migagent_sim.apiserver.routing import PDBS, PODS
from migagent_sim.apiserver.selectors import label_selector_from_object
from migagent_sim.apiserver.store import Store, StoredEvent

JsonDict = dict[str, Any]


@dataclass(frozen=True)
class BudgetRule:
    min_available: int | None = None
    max_unavailable: int | None = None
    replicas: int | None = None
    """The owning controller's scale: expectedPods (needed with max_unavailable)."""

    def desired_healthy(self, selected: int) -> tuple[int, int]:
        """(desiredHealthy, expectedPods) for `selected` matching pods."""
        expected = self.replicas if self.replicas is not None else selected
        if self.min_available is not None:
            return self.min_available, expected
        return max(0, expected - (self.max_unavailable or 0)), expected


def is_healthy(pod: JsonDict) -> bool:
    if "deletionTimestamp" in pod["metadata"]:
        return False
    status = pod.get("status") or {}
    conditions = status.get("conditions")
    if conditions is None:
        return status.get("phase") == "Running"
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class DisruptionController:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._rules: dict[tuple[str, str], BudgetRule] = {}
        store.add_listener(self._on_event)

    def manage(self, namespace: str, name: str, rule: BudgetRule) -> JsonDict:
        """Take over the status of the PDB `namespace/name` and compute it now."""
        with self._lock:
            self._rules[(namespace, name)] = rule
        return self.sync(namespace, name)

    def sync(self, namespace: str, name: str) -> JsonDict:
        with self._lock:
            rule = self._rules[(namespace, name)]
        pods, _ = self._store.list_objects(PODS, namespace)

        def recompute(budget: JsonDict) -> JsonDict:
            selector = label_selector_from_object((budget.get("spec") or {}).get("selector"))
            selected = [p for p in pods if selector is not None and selector.matches(p["metadata"].get("labels") or {})]
            present = {p["metadata"]["name"] for p in selected}
            status = budget.setdefault("status", {})
            # An evicted pod stays "disrupted" until it is gone (the real controller also expires entries).
            disrupted = {k: v for k, v in (status.get("disruptedPods") or {}).items() if k in present}
            healthy = sum(1 for p in selected if is_healthy(p) and p["metadata"]["name"] not in disrupted)
            desired, expected = rule.desired_healthy(len(selected))
            status.update(
                observedGeneration=budget["metadata"].get("generation", 1),
                currentHealthy=healthy,
                desiredHealthy=desired,
                expectedPods=expected,
                disruptionsAllowed=max(0, healthy - desired),
            )
            if disrupted:
                status["disruptedPods"] = disrupted
            else:
                status.pop("disruptedPods", None)
            return budget

        return self._store.update(PDBS, namespace, name, recompute)

    def _on_event(self, event: StoredEvent) -> None:
        if event.resource != PODS:
            return
        namespace = event.obj["metadata"].get("namespace", "")
        with self._lock:
            managed = [name for (ns, name) in self._rules if ns == namespace]
        for name in managed:
            self.sync(namespace, name)
