"""The checks the apiserver makes on written objects that a client bug would most likely trip.

Type errors (a number where a string belongs) are decode failures there (400); rule violations
(bad label syntax, missing event fields) are 422 Invalid.
"""

from __future__ import annotations

import re
from typing import Any

from migagent_sim.apiserver.errors import ApiError, bad_request, invalid
from migagent_sim.apiserver.routing import ResourceType

JsonDict = dict[str, Any]

_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_MAX_LABEL_VALUE = 63
_MAX_ANNOTATIONS_BYTES = 256 * 1024
_QUALIFIED_NAME_RULE = (
    "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (at most 63), with an optional DNS subdomain prefix and '/'"
)
_LABEL_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (at most 63 characters)"
)


def require_string_map(obj: JsonDict, *path: str) -> None:
    """`metadata.labels`, `status.allocatable`...: a JSON object of strings, else 400 like a Go decode error."""
    value: Any = obj
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    if value is None:
        return
    where = ".".join(path)
    if not isinstance(value, dict):
        raise bad_request(f"{where}: expected a JSON object of strings, got {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(item, str):
            raise bad_request(f"{where}[{key!r}]: expected a string, got {type(item).__name__} {item!r}")


def _qualified_name_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"prefix part must be a lowercase DNS subdomain: {_QUALIFIED_NAME_RULE}"
    if len(name) > _MAX_LABEL_VALUE or not _LABEL_NAME.fullmatch(name):
        return _QUALIFIED_NAME_RULE
    return None


def metadata_problems(obj: JsonDict) -> list[str]:
    """Label keys/values and annotation keys/size, worded like apimachinery's validation."""
    metadata = obj.get("metadata") or {}
    problems = []
    for key, value in (metadata.get("labels") or {}).items():
        if (problem := _qualified_name_problem(key)) is not None:
            problems.append(f"metadata.labels: Invalid value: {key!r}: {problem}")
        if value and (len(value) > _MAX_LABEL_VALUE or not _LABEL_NAME.fullmatch(value)):
            problems.append(f"metadata.labels: Invalid value: {value!r}: {_LABEL_VALUE_RULE}")
    annotations = metadata.get("annotations") or {}
    for key in annotations:
        if (problem := _qualified_name_problem(key)) is not None:
            problems.append(f"metadata.annotations: Invalid value: {key!r}: {problem}")
    size = sum(len(k) + len(v) for k, v in annotations.items())
    if size > _MAX_ANNOTATIONS_BYTES:
        problems.append(f"metadata.annotations: Too long: must have at most {_MAX_ANNOTATIONS_BYTES} bytes")
    return problems


def conditions_problems(obj: JsonDict) -> list[str]:
    problems = []
    for index, condition in enumerate((obj.get("status") or {}).get("conditions") or []):
        for field in ("type", "status"):
            if not isinstance(condition, dict) or not isinstance(condition.get(field), str):
                problems.append(f"status.conditions[{index}].{field}: Required value")
    return problems


def validate_node(resource: ResourceType, node: JsonDict) -> None:
    for path in (
        ("metadata", "labels"),
        ("metadata", "annotations"),
        ("status", "capacity"),
        ("status", "allocatable"),
    ):
        require_string_map(node, *path)
    problems = metadata_problems(node) + conditions_problems(node)
    if problems:
        raise invalid(resource.kind, (node.get("metadata") or {}).get("name", ""), problems, plural=resource.plural)


def require_object(body: Any, what: str) -> JsonDict:
    if not isinstance(body, dict):
        raise bad_request(f"{what}: the request body must be a JSON object")
    return body


def check_namespace(body: JsonDict, namespace: str) -> None:
    stated = (body.get("metadata") or {}).get("namespace")
    if stated and stated != namespace:
        raise ApiError(400, "the namespace of the provided object does not match the namespace sent on the request")
