"""ConfigMap writes: POST (create), PUT (replace) and DELETE, as `migagent rollout` keeps its state.

A resourceVersion in a PUT body is a precondition, as for every object: a stale one is 409 Conflict,
which is what makes the rollout's read-modify-write safe between two drivers. Data values must be
strings (the apiserver decodes `data` as map[string]string: anything else is 400).
"""

from __future__ import annotations

from typing import Any

from migagent_sim.apiserver.errors import bad_request, conflict
from migagent_sim.apiserver.routing import CONFIGMAPS
from migagent_sim.apiserver.store import Store
from migagent_sim.apiserver.validation import require_object, require_string_map

JsonDict = dict[str, Any]


def _checked(body: Any, namespace: str) -> JsonDict:
    configmap = require_object(body, "ConfigMap")
    require_string_map(configmap, "data")
    require_string_map(configmap, "metadata", "labels")
    metadata = configmap.setdefault("metadata", {})
    stated = metadata.get("namespace")
    if stated not in (None, "", namespace):
        raise bad_request(
            f"the namespace of the provided object ({stated}) does not match the namespace sent on the request"
            f" ({namespace})"
        )
    metadata["namespace"] = namespace
    configmap.setdefault("apiVersion", "v1")
    configmap.setdefault("kind", "ConfigMap")
    return configmap


def create_configmap(store: Store, namespace: str, body: Any) -> JsonDict:
    configmap = _checked(body, namespace)
    configmap["metadata"].pop("resourceVersion", None)
    return store.create(CONFIGMAPS, configmap)


def replace_configmap(store: Store, namespace: str, name: str, body: Any) -> JsonDict:
    written = _checked(body, namespace)
    body_name = written["metadata"].get("name")
    if body_name != name:
        raise bad_request(f"the name of the object ({body_name}) does not match the name on the URL ({name})")
    stated = written["metadata"].get("resourceVersion")

    def mutate(current: JsonDict) -> JsonDict:
        if stated is not None and stated != current["metadata"]["resourceVersion"]:
            raise conflict(CONFIGMAPS.plural, name)
        return written

    return store.update(CONFIGMAPS, namespace, name, mutate)


def delete_configmap(store: Store, namespace: str, name: str) -> JsonDict:
    return store.delete(CONFIGMAPS, namespace, name)
