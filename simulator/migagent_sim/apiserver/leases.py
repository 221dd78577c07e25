"""coordination.k8s.io/v1 Leases: create (POST) and update (PUT), as the apiserver serves them.

What a leader-election client relies on: a create of a name that exists is 409 AlreadyExists (two
agents racing for a new Lease: exactly one wins), and a PUT carrying a `metadata.resourceVersion` that
is no longer the stored one is 409 Conflict (two agents racing to take or renew: exactly one wins).
A PUT without a resourceVersion is an unconditional update (the Lease strategy allows it).
`spec.leaseDurationSeconds` must be positive when set (validation.ValidateLeaseSpec).
"""

from __future__ import annotations

from typing import Any

from migagent_sim.apiserver.errors import bad_request, conflict, invalid
from migagent_sim.apiserver.routing import LEASES
from migagent_sim.apiserver.store import Store
from migagent_sim.apiserver.validation import check_namespace, require_object

JsonDict = dict[str, Any]


def _validate(lease: JsonDict) -> None:
    spec = lease.get("spec")
    name = (lease.get("metadata") or {}).get("name", "")
    if spec is not None and not isinstance(spec, dict):
        problems = ["spec: Invalid value: must be an object"]
        raise invalid("Lease", name, problems, plural=LEASES.plural, group=LEASES.group)
    duration = (spec or {}).get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        raise invalid(
            "Lease",
            name,
            [f"spec.leaseDurationSeconds: Invalid value: {duration!r}: must be greater than 0"],
            plural=LEASES.plural,
            group=LEASES.group,
        )


def create_lease(store: Store, namespace: str, body: Any) -> JsonDict:
    lease = require_object(body, "Lease")
    check_namespace(lease, namespace)
    lease.setdefault("metadata", {})["namespace"] = namespace
    lease.setdefault("apiVersion", LEASES.api_version)
    lease.setdefault("kind", LEASES.kind)
    _validate(lease)
    return store.create(LEASES, lease)


def replace_lease(store: Store, namespace: str, name: str, body: Any) -> JsonDict:
    written = require_object(body, "Lease")
    metadata = written.setdefault("metadata", {})
    if metadata.get("name") != name:
        stated = metadata.get("name")
        raise bad_request(f"the name of the object ({stated}) does not match the name on the URL ({name})")
    check_namespace(written, namespace)
    metadata["namespace"] = namespace
    written.setdefault("apiVersion", LEASES.api_version)
    written.setdefault("kind", LEASES.kind)
    _validate(written)
    stated = metadata.get("resourceVersion")

    def mutate(current: JsonDict) -> JsonDict:
        if stated is not None and stated != current["metadata"]["resourceVersion"]:
            raise conflict(LEASES.plural, name, group=LEASES.group)
        return written

    return store.update(LEASES, namespace, name, mutate)
