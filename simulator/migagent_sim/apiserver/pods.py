"""Pod deletion and the eviction subresource (docs/kubernetes.md §1), and pod creation.

A deleted pod that ran stays Terminating for its grace period (terminating.py), then leaves with a DELETED
watch event; the object returned carries deletionTimestamp and deletionGracePeriodSeconds. An eviction
consumes one of the PDB's disruptionsAllowed (a second eviction under an exhausted budget is 429); a
budget added with `add_managed_pdb` gets it back from the disruption controller (disruption.py) when
replacements are Ready, others from tests (`set_pdb_disruptions_allowed`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from migagent.clock import Clock
from migagent_sim.apiserver.errors import ApiError, bad_request, not_found
from migagent_sim.apiserver.objects import timestamp
from migagent_sim.apiserver.routing import PDBS, PODS
from migagent_sim.apiserver.selectors import label_selector_from_object
from migagent_sim.apiserver.store import Store
from migagent_sim.apiserver.terminating import Terminator, removed_at_once
from migagent_sim.apiserver.validation import check_namespace, require_object

JsonDict = dict[str, Any]
_DEFAULT_GRACE_S = 30
PDB_BLOCKED_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_PDBS_MESSAGE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)


def create_pod(store: Store, namespace: str, body: Any) -> JsonDict:
    pod = require_object(body, "Pod")
    check_namespace(pod, namespace)
    pod.setdefault("metadata", {})["namespace"] = namespace
    pod.setdefault("apiVersion", "v1")
    pod.setdefault("kind", "Pod")
    if not (pod.get("spec") or {}).get("containers"):
        raise ApiError(422, "spec.containers: Required value")
    pod.setdefault("status", {"phase": "Pending"})
    return store.create(PODS, pod)


def delete_pod(
    store: Store,
    namespace: str,
    name: str,
    *,
    options: JsonDict,
    query: Mapping[str, str],
    clock: Clock,
    terminator: Terminator | None = None,
) -> JsonDict:
    """DELETE answers with the Pod itself (pod storage sets ReturnDeletedObject), never a Status.

    With a `terminator`, a pod that ran stays Terminating for its grace period (terminating.py);
    without, it leaves the store at once carrying the marks a graceful delete sets.
    """
    grace = _grace_period_s(options, query)
    dry_run = "All" in (options.get("dryRun") or []) or query.get("dryRun") == "All"
    pod = store.get(PODS, namespace, name)
    if pod is None:
        raise not_found(PODS.plural, name)
    spec_grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", _DEFAULT_GRACE_S)
    grace_s = spec_grace if grace is None else grace

    def mark(pod: JsonDict) -> JsonDict:
        _check_preconditions(pod, options.get("preconditions") or {})
        metadata = pod["metadata"]
        stated = metadata.get("deletionGracePeriodSeconds")
        if stated is None or grace_s < stated:  # a second delete may only shorten the grace period
            metadata["deletionTimestamp"] = timestamp(clock.wall() + grace_s)
            metadata["deletionGracePeriodSeconds"] = grace_s
        return pod

    if dry_run:
        return mark(pod)
    if terminator is None or terminator.immediate or removed_at_once(pod, grace_s):
        return store.delete(PODS, namespace, name, finalize=mark)
    terminating = store.update(PODS, namespace, name, mark)
    terminator.schedule(terminating, terminating["metadata"]["deletionGracePeriodSeconds"])
    return terminating


def evict_pod(
    store: Store, namespace: str, name: str, body: Any, *, clock: Clock, terminator: Terminator | None = None
) -> None:
    """Delete the pod unless a PDB forbids it; raises ApiError with the apiserver's code otherwise."""
    eviction = require_object(body, "Eviction")
    body_name = (eviction.get("metadata") or {}).get("name")
    if body_name != name:
        raise bad_request("name in URL does not match name in Eviction object")
    pod = store.get(PODS, namespace, name)
    if pod is None:
        raise not_found(PODS.plural, name)
    if _needs_budget_check(pod):
        _check_budgets(store, pod, clock=clock)
    options = eviction.get("deleteOptions") or {}
    delete_pod(store, namespace, name, options=options, query={}, clock=clock, terminator=terminator)


def matching_pdbs(store: Store, pod: JsonDict) -> list[JsonDict]:
    """PDBs in the pod's namespace whose selector selects it (a PDB without selector selects nothing)."""
    budgets, _ = store.list_objects(PDBS, pod["metadata"]["namespace"])
    labels = pod["metadata"].get("labels") or {}
    matching = []
    for budget in budgets:
        selector = label_selector_from_object((budget.get("spec") or {}).get("selector"))
        if selector is not None and selector.matches(labels):
            matching.append(budget)
    return matching


def _needs_budget_check(pod: JsonDict) -> bool:
    # Terminal, not-yet-running and already-terminating pods are deleted without consulting PDBs.
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed", "Pending") and "deletionTimestamp" not in pod["metadata"]


def _check_budgets(store: Store, pod: JsonDict, *, clock: Clock) -> None:
    """Refuse (429) unless the pod's PDB allows a disruption, and consume one (eviction.go checkAndDecrement).

    The check and the decrement are one write to the PDB, so concurrent evictions under one budget
    cannot both take its last disruption; the pod goes into status.disruptedPods, which the
    disruption controller (disruption.py) does not count as healthy."""
    budgets = matching_pdbs(store, pod)
    if len(budgets) > 1:
        raise ApiError(500, MULTIPLE_PDBS_MESSAGE, reason="")
    if not budgets:
        return
    metadata = budgets[0]["metadata"]

    def consume(budget: JsonDict) -> JsonDict:
        name = budget["metadata"]["name"]
        status = budget.setdefault("status", {})
        if status.get("observedGeneration", 0) < budget["metadata"].get("generation", 0):
            cause = {
                "reason": "DisruptionBudget",
                "message": f"The disruption budget {name} is still being processed by the server.",
            }
            raise ApiError(429, PDB_BLOCKED_MESSAGE, causes=[cause], retry_after_s=10)
        allowed = status.get("disruptionsAllowed", 0)
        if allowed < 0:
            raise ApiError(403, "pdb disruptions allowed is negative")
        if allowed == 0:
            # Worded as eviction.go's checkAndDecrement does; unset counts are Go's zero value. Clients
            # (migagent's drain) take the budget's name from this cause instead of listing PDBs.
            message = (
                f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods "
                f"and has {status.get('currentHealthy', 0)} currently"
            )
            raise ApiError(429, PDB_BLOCKED_MESSAGE, causes=[{"reason": "DisruptionBudget", "message": message}])
        status["disruptionsAllowed"] = allowed - 1
        status.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = timestamp(clock.wall())
        return budget

    store.update(PDBS, metadata["namespace"], metadata["name"], consume)


def _grace_period_s(options: JsonDict, query: Mapping[str, str]) -> int | None:
    raw = query.get("gracePeriodSeconds")
    if raw is not None:
        try:
            return int(raw)
        except ValueError:
            raise bad_request(f"gracePeriodSeconds must be an integer, got {raw!r}") from None
    stated = options.get("gracePeriodSeconds")
    return stated if isinstance(stated, int) else None


def _check_preconditions(pod: JsonDict, preconditions: JsonDict) -> None:
    metadata = pod["metadata"]
    for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
        wanted = preconditions.get(field)
        if wanted is not None and wanted != metadata.get(field):
            message = (
                f"Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {metadata.get(field)}"
            )
            raise ApiError(409, message, name=metadata["name"], kind=PODS.plural)
