"""Read a layout file's YAML (or JSON) into the JSON-shaped data mig-parted's own parser sees.

mig-parted reads a layout with sigs.k8s.io/yaml: go-yaml v2 decodes YAML 1.1 into Go values, which
are re-encoded as JSON (keys become strings) before its `UnmarshalJSON` runs. We compose the text
with PyYAML (scanner and parser made to match libyaml where they differ: tabs in flow context, so
tab-indented JSON loads; anchors may be redefined; no JSON-only `\\/` escape) and then build the
values ourselves with go-yaml v2's resolution rules (`goyaml_resolve`) and the JSON step's key rules.

Where go-yaml v2 would silently pick one of two meanings we refuse instead, naming the place:
a key written twice, a key written before a `<<` merge that also sets it (go-yaml v2 lets the merge
win, YAML's merge rule the written key), more than one document (go-yaml v2 reads only the first),
keys JSON cannot hold (null, timestamps, lists), and tags mig-parted has no meaning for.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import yaml

from migagent.layout.goyaml_resolve import (
    BOOL,
    MERGE,
    STR,
    ScalarTagError,
    YamlTimestamp,
    construct_scalar,
    go_float32_key,
    go_resolve,
)

_MAX_DEPTH = 100  # a layout nests 5 levels; past this, Python's own recursion limit would decide, by the caller's stack
TOO_DEEP = f"invalid YAML: lists and mappings nested more than {_MAX_DEPTH} levels deep"
_MAX_NODES = 200_000  # aliases can expand a small file enormously ("billion laughs")
_KNOWN_TAGS = frozenset({STR, MERGE, BOOL} | {f"tag:yaml.org,2002:{t}" for t in ("int", "float", "null",
                                                                                 "timestamp", "map", "seq")})


class YamlSyntaxError(ValueError):
    """Text that is not a single well-formed YAML document; the message carries line and column."""


@dataclass(frozen=True)
class LoadProblem:
    """Something in the YAML itself (not the layout schema) that mig-parted would read differently."""

    path: str
    message: str


class JsonKey(str):
    """A mapping key as mig-parted's YAML->JSON step writes it, remembering how the file wrote it.

    `kind` is what YAML read (`str`, `int`, `float` or `bool`) and `spelling` the text in the file:
    `010:` is the key "8" of kind int spelled "010".
    """

    kind: str
    spelling: str

    def __new__(cls, text: str, *, kind: str, spelling: str) -> JsonKey:
        key = super().__new__(cls, text)
        key.kind = kind
        key.spelling = spelling
        return key


_PLAIN_ASCII = re.compile(r"[!-~]+")


def path_part(name: str) -> str:
    """A mapping key as it appears in an error path; quoted when spaces or control characters would hide it."""
    if _PLAIN_ASCII.fullmatch(name):  # the common case, decided in C
        return name
    if name and name.isprintable() and not any(ch.isspace() for ch in name):
        return name
    return json.dumps(name)


class GoYamlV2Loader(yaml.SafeLoader):
    """PyYAML's scanner, parser and composer, adjusted to accept what libyaml/go-yaml v2 accept."""

    # go-yaml v2 knows YAML 1.1's escapes only; `\/` (JSON's) is an error there.
    # The stub marks it Final, but the scanner reads it through `self`, which is what lets us narrow it.
    ESCAPE_REPLACEMENTS = MappingProxyType(  # type: ignore[misc,assignment]
        {k: v for k, v in yaml.SafeLoader.ESCAPE_REPLACEMENTS.items() if k != "/"}
    )

    def scan_to_next_token(self) -> None:
        # libyaml skips tabs in flow context and where no simple key may start (after a token on the
        # line); PyYAML skips only spaces, so it rejects JSON indented with tabs.
        if self.index == 0 and self.peek() == "\ufeff":
            self.forward()
        while True:
            while self.peek() == " " or (self.peek() == "\t" and (self.flow_level or not self.allow_simple_key)):
                self.forward()
            if self.peek() == "#":
                while self.peek() not in "\0\r\n\x85\u2028\u2029":
                    self.forward()
            if not self.scan_line_break():  # type: ignore[no-untyped-call]
                return
            if not self.flow_level:
                self.allow_simple_key = True

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        # go-yaml v2 lets an anchor be defined again (the later one wins); PyYAML refuses.
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if not isinstance(event, yaml.AliasEvent) and event.anchor is not None:
            self.anchors.pop(event.anchor, None)
        return super().compose_node(parent, index)

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and implicit[0]:
            return MERGE if value == "<<" else go_resolve(value)[0]
        tag: str = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        return tag


_CParser: type | None = getattr(yaml, "CParser", None) or getattr(getattr(yaml, "cyaml", None), "CParser", None)

if _CParser is not None:

    class _LibyamlLoader(_CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):  # type: ignore[misc,valid-type]
        """libyaml's scanner, parser and composer (go-yaml v2 is a port of libyaml), in C, with
        go-yaml v2's scalar resolution: ~20x faster than PyYAML's Python ones, so a 1 MB file (a
        ConfigMap's limit) loads in a fraction of a second. libyaml refuses a redefined anchor and
        a second document, which go-yaml v2 reads: those go to the Python loader (`_compose`)."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)  # type: ignore[misc]
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

        def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
            if kind is yaml.ScalarNode and implicit[0]:
                return MERGE if value == "<<" else go_resolve(value)[0]
            tag: str = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
            return tag


def _compose(text: str, *, libyaml: bool) -> yaml.Node | None:
    """The document's node graph. libyaml's parser reads it when it can say nothing different from
    the Python loader: `\\/` (an escape libyaml takes and go-yaml v2 refuses) goes to the Python
    loader, and so does any text libyaml refuses, so that refusals carry the Python loader's messages
    (and what the Python loader accepts with libyaml's tab rules stays accepted)."""
    if libyaml and _CParser is not None and "\\/" not in text:
        fast = _LibyamlLoader(text)
        try:
            node: yaml.Node | None = fast.get_single_node()
            return node
        except yaml.YAMLError as exc:
            if "nesting depth" in str(exc):  # libyaml's limit (1000 levels): the Python loader's is lower, and slow
                raise YamlSyntaxError(TOO_DEEP) from exc
        finally:
            fast.dispose()
    loader = GoYamlV2Loader(text)  # the reader scans the text here (it refuses control characters)
    try:
        return _single_document(loader)
    finally:
        loader.dispose()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Building a large file's node graph and values allocates hundreds of thousands of objects that
    all stay alive; the cyclic collector would walk them again and again (half the load time of a
    1 MB file). Nothing made here needs it, so it is paused while the file is read."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_strict(text: str, *, libyaml: bool = True) -> tuple[object, tuple[LoadProblem, ...]]:
    """Read one document; raise `YamlSyntaxError` on malformed text, return data and problems.
    `libyaml=False` reads with the Python loader only (the tests compare the two)."""
    with gc_paused():
        return _load_strict(text, libyaml=libyaml)


def _load_strict(text: str, *, libyaml: bool) -> tuple[object, tuple[LoadProblem, ...]]:
    converter = _Converter()
    try:
        root = _compose(text, libyaml=libyaml)
        data = None if root is None else converter.value(root, path="")
    except yaml.MarkedYAMLError as exc:
        raise YamlSyntaxError(_describe(exc)) from exc
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(f"invalid YAML: {' '.join(str(exc).split())}") from exc
    except RecursionError as exc:  # the composer's and the converter's: Python's recursion limit is the bound
        raise YamlSyntaxError(TOO_DEEP) from exc
    return data, tuple(converter.problems)


def load_plain(text: str) -> object:
    """A file that is not a layout (hooks, a device plugin config), read as PyYAML's safe loader reads
    it; YamlSyntaxError for malformed text. libyaml's loader where installed: it refuses 1,000 levels of
    nesting and builds the values without recursion, so how deep a file may be does not depend on the
    caller's stack; the Python loader's RecursionError is said as any other refusal."""
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(f"not valid YAML: {' '.join(str(exc).split())}") from exc
    except RecursionError as exc:
        raise YamlSyntaxError(TOO_DEEP) from exc


def _single_document(loader: GoYamlV2Loader) -> yaml.Node | None:
    loader.get_event()  # type: ignore[no-untyped-call]  # stream start
    root = None if loader.check_event(yaml.StreamEndEvent) else loader.compose_document()
    if not loader.check_event(yaml.StreamEndEvent):
        line = loader.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
        raise YamlSyntaxError(
            f"line {line}: a second YAML document starts here; mig-parted reads only the first document "
            "of a file and ignores the rest, so keep one document (one 'version: v1' and one 'mig-configs')"
        )
    return root


def _describe(exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = exc.problem or exc.context or "malformed document"
    context = f" ({exc.context})" if exc.context and exc.problem else ""
    return f"{where}invalid YAML: {problem}{context}"


_Written = dict[str, list[tuple[int, str]]]  # key -> (line, spelling) of each explicit occurrence


class _Converter:
    """Builds go-yaml v2's values, then JSON's string keys, from the composed node graph."""

    def __init__(self) -> None:
        self.problems: list[LoadProblem] = []
        self._open: set[int] = set()
        self._seen: set[int] = set()
        self._expanding = 0  # > 0 while building values for a node seen before: an alias's copy
        self._budget = _MAX_NODES

    def problem(self, path: str, node: yaml.Node, message: str) -> None:
        self.problems.append(LoadProblem(path, f"line {node.start_mark.line + 1}: {message}"))

    def value(self, node: yaml.Node, *, path: str) -> object:
        # Only what aliases add counts against the budget: a large file written out in full is read
        # whatever its size; a small one whose aliases multiply ("billion laughs") is refused.
        repeat = id(node) in self._seen  # every node stays alive while converting: ids are unique
        if repeat:
            self._expanding += 1
        else:
            self._seen.add(id(node))
        try:
            if self._expanding:
                self._budget -= 1
                if self._budget < 0:
                    if self._budget == -1:
                        message = f"the document expands to more than {_MAX_NODES} values through aliases"
                        self.problem(path, node, message)
                    return None
            return self._value(node, path=path)
        finally:
            if repeat:
                self._expanding -= 1

    def _value(self, node: yaml.Node, *, path: str) -> object:
        if node.tag not in _KNOWN_TAGS:
            tag = node.tag.replace("tag:yaml.org,2002:", "!!", 1)
            self.problem(path, node, f"tag {tag} has no meaning in a layout file; remove it")
            return None
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path=path)
        return self._collection(node, path=path)

    def _scalar(self, node: yaml.ScalarNode, *, path: str) -> object:
        try:
            return construct_scalar(node.tag, node.value)
        except ScalarTagError as exc:
            self.problem(path, node, str(exc))
            return None

    def _collection(self, node: yaml.Node, *, path: str) -> object:
        if id(node) in self._open:
            self.problem(path, node, "an alias refers to a node that contains it; mig-parted refuses the cycle")
            return None
        if len(self._open) >= _MAX_DEPTH:  # the collections open are those this one is nested in
            raise YamlSyntaxError(TOO_DEEP)
        self._open.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.value(item, path=f"{path}[{i}]") for i, item in enumerate(node.value)]
            return self._mapping(node, path=path)
        finally:
            self._open.discard(id(node))

    def _mapping(self, node: yaml.Node, *, path: str) -> dict[JsonKey, object]:
        out: dict[JsonKey, object] = {}
        written: _Written = {}
        for key_node, value_node in node.value:
            if key_node.tag == MERGE:
                self._merge(key_node, value_node, into=out, written=written, path=path)
                continue
            key = self._key(key_node, path=path)
            if key is None:
                continue
            written.setdefault(key, []).append((key_node.start_mark.line + 1, key.spelling))
            out[key] = self.value(value_node, path=f"{path}.{path_part(key)}" if path else path_part(key))
        for text, places in written.items():
            if len(places) > 1:
                self._duplicate(path, text, places)
        return out

    def _duplicate(self, path: str, key: str, places: list[tuple[int, str]]) -> None:
        lines = " and ".join(str(line) for line, _ in places)
        spellings = sorted({spelling for _, spelling in places})
        same = f"; {' and '.join(spellings)} are all the key {key!r} in mig-parted" if len(spellings) > 1 else ""
        message = f"key {path_part(key)!r} appears more than once (lines {lines}){same}; write each key once"
        self.problems.append(LoadProblem(path, message))

    def _merge(
        self, key_node: yaml.Node, node: yaml.Node, *, into: dict[JsonKey, object], written: _Written, path: str
    ) -> None:
        sources = list(reversed(node.value)) if isinstance(node, yaml.SequenceNode) else [node]
        merged: dict[JsonKey, object] = {}
        for source in sources:  # later sources first, so that earlier ones take precedence
            if not isinstance(source, yaml.MappingNode):
                self.problem(path, source, "a '<<' merge takes a mapping (or a list of mappings) from an alias")
                continue
            value = self.value(source, path=path)
            if isinstance(value, dict):
                merged.update(value)
        for key, value in merged.items():
            if key in written:
                line = written[key][0][0]
                self.problem(path, key_node, (
                    f"key {path_part(key)!r} (line {line}) is written before a '<<' merge that also sets it; "
                    "mig-parted keeps the merged value, YAML's merge rule the written one: "
                    "write the key after the merge"
                ))
            into[key] = value

    def _key(self, node: yaml.Node, *, path: str) -> JsonKey | None:
        if not isinstance(node, yaml.ScalarNode):
            self.problem(path, node, "a mapping key must be a plain value, not a list or mapping")
            return None
        before = len(self.problems)
        value = self.value(node, path=path)
        if len(self.problems) > before:
            return None
        text = _json_key_text(value)
        if text is None:
            what = "a timestamp" if isinstance(value, YamlTimestamp) else "null" if value is None else "too large"
            message = f"key {node.value!r} reads as {what}, which mig-parted cannot use as a key; quote it"
            self.problem(path, node, message)
            return None
        return JsonKey(text, kind=type(value).__name__, spelling=node.value)


def _json_key_text(value: object) -> str | None:
    """sigs.k8s.io/yaml's key conversion: strings stay, bools and numbers become their text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if -(2**63) <= value < 2**63 else None
    if isinstance(value, float):
        return go_float32_key(value)
    return None
