"""YAML loading for layout files: safe constructors, duplicate keys found, syntax errors located.

PyYAML silently keeps the last of two equal keys; in a layout file that hides a typo (two entries
both meaning `mig-devices`), so duplicates are found on the node tree, where the path to them and
their line numbers are still known, and reported like any other layout error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import yaml


class YamlSyntaxError(ValueError):
    """Text that is not a single well-formed YAML document; the message carries line and column."""


@dataclass(frozen=True)
class DuplicateKey:
    """`key` appears more than once in the mapping at `path` (empty for the top level)."""

    path: str
    key: str
    lines: tuple[int, ...]


class StrictSafeLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that also reports keys written twice in one mapping."""

    def duplicate_keys(self, root: yaml.Node) -> tuple[DuplicateKey, ...]:
        return tuple(_walk(root, path="", seen=set()))


def path_part(name: str) -> str:
    """A mapping key as it appears in an error path; quoted when spaces or control characters would hide it."""
    if name and name.isprintable() and not any(ch.isspace() for ch in name):
        return name
    return json.dumps(name)


def load_strict(text: str) -> tuple[object, tuple[DuplicateKey, ...]]:
    """Load one YAML document with safe constructors; raise `YamlSyntaxError` on malformed text."""
    try:
        # The reader already scans the text here (it refuses control characters).
        loader = StrictSafeLoader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                return None, ()
            return loader.construct_document(root), loader.duplicate_keys(root)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        raise YamlSyntaxError(_describe(exc)) from exc
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(f"invalid YAML: {' '.join(str(exc).split())}") from exc


def _describe(exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = exc.problem or exc.context or "malformed document"
    context = f" ({exc.context})" if exc.context and exc.problem else ""
    return f"{where}invalid YAML: {problem}{context}"


def _walk(node: yaml.Node, *, path: str, seen: set[int]) -> Iterator[DuplicateKey]:
    # Anchors can make the tree a graph (even a cycle); visit each node once.
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        yield from _mapping_duplicates(node, path=path)
        for key_node, value_node in node.value:
            key = path_part(str(key_node.value)) if isinstance(key_node, yaml.ScalarNode) else "?"
            yield from _walk(value_node, path=f"{path}.{key}" if path else key, seen=seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _walk(item, path=f"{path}[{index}]", seen=seen)


def _mapping_duplicates(node: yaml.MappingNode, *, path: str) -> Iterator[DuplicateKey]:
    # Keyed by tag too: `1` (an int) and `"1"` (a string) are different keys.
    lines_by_key: dict[tuple[str, str], list[int]] = {}
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
            lines = lines_by_key.setdefault((key_node.tag, str(key_node.value)), [])
            lines.append(key_node.start_mark.line + 1)
    for (_, key), lines in lines_by_key.items():
        if len(lines) > 1:
            yield DuplicateKey(path=path, key=path_part(key), lines=tuple(lines))
