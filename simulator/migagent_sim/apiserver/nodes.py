"""Node writes: PATCH (three patch types) and PUT, for the main resource and the status subresource.

Node strategy (pkg/registry/core/node/strategy.go): writes to the main resource keep the stored status,
writes to /status keep the stored spec. A resourceVersion in the written object (PUT body, or left in the
patched result because the patch set it) is a precondition: a mismatch is 409 Conflict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from migagent_sim.apiserver.errors import ApiError, bad_request, conflict
from migagent_sim.apiserver.jsonpatch import json_patch
from migagent_sim.apiserver.patch import merge_patch, parse_patch_type, strategic_merge_patch
from migagent_sim.apiserver.routing import NODES
from migagent_sim.apiserver.store import Store
from migagent_sim.apiserver.validation import require_object, validate_node

JsonDict = dict[str, Any]
Admit = Callable[[JsonDict, JsonDict], None]
"""`admit(old, new)`: validating admission on the final object; raises ApiError to refuse."""


def apply_patch(patch_type: str, current: JsonDict, document: Any) -> JsonDict:
    if patch_type == "json":
        patched = json_patch(current, document)
    elif patch_type == "merge":
        patched = merge_patch(current, require_object(document, "merge patch"))
    else:
        patched = strategic_merge_patch(current, document)
    if not isinstance(patched, dict):
        raise ApiError(422, "the patched object is not a JSON object")
    return patched


def _check_subresource(subresource: str | None) -> None:
    if subresource not in (None, "status"):
        raise ApiError(404, f"the server could not find the requested resource (nodes/{subresource})")


def _apply_strategy(current: JsonDict, written: JsonDict, subresource: str | None) -> JsonDict:
    kept = "spec" if subresource == "status" else "status"
    if kept in current:
        written[kept] = current[kept]
    else:
        written.pop(kept, None)
    written.setdefault("apiVersion", "v1")
    written.setdefault("kind", "Node")
    validate_node(NODES, written)
    return written


def _admitted(current: JsonDict, written: JsonDict, admit: Admit | None) -> JsonDict:
    # Validating admission runs after the strategy (status or spec restored), before storage.
    if admit is not None:
        admit(current, written)
    return written


def _check_precondition(current: JsonDict, written: JsonDict) -> None:
    stated = (written.get("metadata") or {}).get("resourceVersion")
    if stated is not None and stated != current["metadata"]["resourceVersion"]:
        raise conflict(NODES.plural, current["metadata"]["name"])


def patch_node(
    store: Store,
    name: str,
    subresource: str | None,
    content_type: str | None,
    document: Any,
    *,
    admit: Admit | None = None,
) -> JsonDict:
    _check_subresource(subresource)
    patch_type = parse_patch_type(content_type)

    def mutate(current: JsonDict) -> JsonDict:
        patched = apply_patch(patch_type, current, document)
        _check_precondition(current, patched)
        return _admitted(current, _apply_strategy(current, patched, subresource), admit)

    return store.update(NODES, "", name, mutate)


def replace_node(
    store: Store, name: str, subresource: str | None, document: Any, *, admit: Admit | None = None
) -> JsonDict:
    _check_subresource(subresource)
    written = require_object(document, "Node")
    body_name = (written.get("metadata") or {}).get("name")
    if body_name != name:
        raise bad_request(f"the name of the object ({body_name}) does not match the name on the URL ({name})")

    def mutate(current: JsonDict) -> JsonDict:
        _check_precondition(current, written)
        return _admitted(current, _apply_strategy(current, written, subresource), admit)

    return store.update(NODES, "", name, mutate)
