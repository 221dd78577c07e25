"""JSON merge patch (RFC 7386) and the subset of strategic merge patch the Kubernetes core types need.

Strategic merge differs from merge patch only for lists: lists whose Go field carries
`patchStrategy:"merge"` are merged element-wise by their `patchMergeKey` (Node and Pod conditions by `type`,
containers by `name`, ...), primitive "merge" lists (finalizers) are unioned; every other list (taints,
tolerations: `listType=atomic`) is replaced whole. Go finds the strategy from the struct schema; this fake
looks it up by field name, which is unambiguous for the fields Node, Pod, Event and DaemonSet carry.
"""

from __future__ import annotations

import copy
from typing import Any

from migagent_sim.apiserver.errors import ApiError, bad_request

# Field name -> patchMergeKey (k8s.io/api core/v1 and meta/v1 struct tags).
MERGE_KEYS = {
    "conditions": "type",
    "addresses": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "ownerReferences": "uid",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}
# Lists of scalars with patchStrategy "merge": a patch adds its values instead of replacing the list.
MERGED_SCALAR_LISTS = frozenset({"finalizers"})

_DIRECTIVE = "$patch"
_SET_ELEMENT_ORDER = "$setElementOrder/"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList/"
_RETAIN_KEYS = "$retainKeys"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes a member, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch document to `target` (which is not modified)."""
    if not isinstance(patch, dict):
        raise bad_request("a strategic merge patch must be a JSON object, not " + type(patch).__name__)
    return _merge_map(target if isinstance(target, dict) else {}, patch)


def _merge_map(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    directive = patch.get(_DIRECTIVE)
    if directive == "delete":
        return {}
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != _DIRECTIVE}
    if directive is not None:
        raise bad_request(f"unknown patch directive {_DIRECTIVE}: {directive!r} (valid: replace, delete, merge)")
    result = copy.deepcopy(target)
    for key, value in patch.items():
        if key.startswith(_SET_ELEMENT_ORDER) or key == _RETAIN_KEYS:
            continue  # ordering hints and retainKeys do not change which members exist here
        if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            field = key[len(_DELETE_FROM_PRIMITIVE_LIST) :]
            result[field] = [item for item in result.get(field) or [] if item not in (value or [])]
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            result[key] = _merge_map(current if isinstance(current, dict) else {}, value)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    current_items = current if isinstance(current, list) else []
    if field in MERGED_SCALAR_LISTS:
        return [*current_items, *(item for item in patch if item not in current_items)]
    merge_key = MERGE_KEYS.get(field)
    if merge_key is None:
        return copy.deepcopy(patch)
    if any(isinstance(item, dict) and item.get(_DIRECTIVE) == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and i.get(_DIRECTIVE) == "replace")]
    merged = [copy.deepcopy(item) for item in current_items]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise bad_request(f"{field}: each element of a merged list needs its merge key {merge_key!r}")
        _merge_keyed_item(merged, item, merge_key)
    return merged


def _merge_keyed_item(merged: list[Any], item: dict[str, Any], merge_key: str) -> None:
    position = next(
        (
            i
            for i, existing in enumerate(merged)
            if isinstance(existing, dict) and existing.get(merge_key) == item[merge_key]
        ),
        None,
    )
    if item.get(_DIRECTIVE) == "delete":
        if position is not None:
            del merged[position]
    elif position is None:
        merged.append(_merge_map({}, item))
    else:
        merged[position] = _merge_map(merged[position], item)


def parse_patch_type(content_type: str | None) -> str:
    """'json', 'merge' or 'strategic' from the PATCH Content-Type; anything else is 415 like the apiserver."""
    media_type = (content_type or "").split(";")[0].strip().lower()
    kinds = {
        "application/json-patch+json": "json",
        "application/merge-patch+json": "merge",
        "application/strategic-merge-patch+json": "strategic",
    }
    if media_type not in kinds:
        raise ApiError(
            415,
            f"the body of the request was in an unknown format - accepted media types include: {', '.join(kinds)}",
        )
    return kinds[media_type]
