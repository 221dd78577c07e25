"""JSON Patch (RFC 6902): add, remove, replace, move, copy, test; failures are 422 like the apiserver's."""

from __future__ import annotations

import copy
from typing import Any

from migagent_sim.apiserver.errors import ApiError, bad_request


class _PatchFailedError(Exception):
    pass


def json_patch(document: Any, operations: Any) -> Any:
    """Apply `operations` to a copy of `document`; a malformed patch is 400, one that cannot apply is 422."""
    if not isinstance(operations, list) or not all(isinstance(op, dict) for op in operations):
        raise bad_request("a JSON patch must be a list of operation objects")
    result = copy.deepcopy(document)
    for index, operation in enumerate(operations):
        try:
            result = _apply(result, operation)
        except _PatchFailedError as failure:
            raise ApiError(422, f"the JSON patch operation #{index} {operation!r} failed: {failure}") from failure
    return result


def _tokens(pointer: Any) -> list[str]:
    if not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
        raise _PatchFailedError(f"path {pointer!r} is not a JSON pointer (it must start with '/')")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _apply(document: Any, operation: dict[str, Any]) -> Any:
    op = operation.get("op")
    if op not in ("add", "remove", "replace", "move", "copy", "test"):
        raise _PatchFailedError(f"unknown op {op!r} (valid: add, remove, replace, move, copy, test)")
    path = _tokens(operation.get("path"))
    if op in ("add", "replace", "test") and "value" not in operation:
        raise _PatchFailedError(f"op {op} needs a 'value'")
    if op == "test":
        if _get(document, path) != operation["value"]:
            raise _PatchFailedError(f"test failed: the value at {operation['path']} is not {operation['value']!r}")
        return document
    if op == "add":
        return _add(document, path, copy.deepcopy(operation["value"]))
    if op == "remove":
        return _remove(document, path)[0]
    if op == "replace":
        _get(document, path)
        return _add(_remove(document, path)[0], path, copy.deepcopy(operation["value"]))
    source = _tokens(operation.get("from"))
    if op == "move":
        document, value = _remove(document, source)
        return _add(document, path, value)
    return _add(document, path, copy.deepcopy(_get(document, source)))


def _get(document: Any, path: list[str]) -> Any:
    node = document
    for token in path:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise _PatchFailedError(f"path /{'/'.join(path)} does not exist")
    return node


def _add(document: Any, path: list[str], value: Any) -> Any:
    if not path:
        return value
    parent = _get(document, path[:-1])
    token = path[-1]
    if isinstance(parent, dict):
        parent[token] = value
    elif isinstance(parent, list):
        index = len(parent) if token == "-" else _list_index(token, len(parent) + 1)
        parent.insert(index, value)
    else:
        raise _PatchFailedError(f"cannot add below a scalar at /{'/'.join(path[:-1])}")
    return document


def _remove(document: Any, path: list[str]) -> tuple[Any, Any]:
    if not path:
        return None, document
    parent = _get(document, path[:-1])
    token = path[-1]
    if isinstance(parent, dict) and token in parent:
        return document, parent.pop(token)
    if isinstance(parent, list):
        return document, parent.pop(_list_index(token, len(parent)))
    raise _PatchFailedError(f"path /{'/'.join(path)} does not exist")


def _list_index(token: str, limit: int) -> int:
    if not token.isdigit() or int(token) >= limit:
        raise _PatchFailedError(f"list index {token!r} is out of range")
    return int(token)
