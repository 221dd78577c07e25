"""Field and label selectors as the apiserver parses them from `fieldSelector=` / `labelSelector=`."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

JsonDict = dict[str, Any]


class SelectorError(ValueError):
    """A selector that does not parse, or names a field the resource cannot be selected by."""


# ---------------------------------------------------------------------------------------------- field selectors


def _path(*keys: str, default: str = "") -> Callable[[JsonDict], str]:
    def read(obj: JsonDict) -> str:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            return default
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return read


_COMMON_FIELDS = {"metadata.name": _path("metadata", "name"), "metadata.namespace": _path("metadata", "namespace")}
_EVENT_FIELDS = {
    "involvedObject.kind": _path("involvedObject", "kind"),
    "involvedObject.name": _path("involvedObject", "name"),
    "involvedObject.namespace": _path("involvedObject", "namespace"),
    "involvedObject.uid": _path("involvedObject", "uid"),
    "reason": _path("reason"),
    "type": _path("type"),
}
# What each resource can be selected by (pkg/registry/*/strategy.go ToSelectableFields).
SELECTABLE_FIELDS: dict[str, dict[str, Callable[[JsonDict], str]]] = {
    "nodes": {**_COMMON_FIELDS, "spec.unschedulable": _path("spec", "unschedulable", default="false")},
    "pods": {
        **_COMMON_FIELDS,
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": _path("spec", "hostNetwork", default="false"),
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "events": {**_COMMON_FIELDS, **_EVENT_FIELDS},
    # pkg/registry/resource/resourceslice/strategy.go: the node, the driver and the pool name.
    "resourceslices": {
        **_COMMON_FIELDS,
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.driver": _path("spec", "driver"),
        "spec.pool.name": _path("spec", "pool", "name"),
    },
}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    equal: bool  # False for "!="
    value: str


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...]
    getters: Mapping[str, Callable[[JsonDict], str]]

    def matches(self, obj: JsonDict) -> bool:
        return all((self.getters[r.field](obj) == r.value) == r.equal for r in self.requirements)


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, current, escaped = [], "", False
    for char in text:
        if escaped:
            current, escaped = current + char, False
        elif char == "\\":
            current, escaped = current + char, True
        elif char == separator:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def _parse_field_term(term: str) -> FieldRequirement:
    for operator in ("!=", "==", "="):
        index = term.find(operator)
        while index > 0 and term[index - 1] == "\\":
            index = term.find(operator, index + 1)
        if index > 0:
            field, value = term[:index].strip(), term[index + len(operator) :]
            return FieldRequirement(field, operator != "!=", _unescape(value))
    raise SelectorError(f"invalid selector: '{term}'; can't understand '{term}' (use field=value, == or !=)")


def parse_field_selector(text: str, resource_key: str) -> FieldSelector:
    """`spec.nodeName=n1,status.phase!=Succeeded`; fields outside the resource's selectable set give 400."""
    getters = SELECTABLE_FIELDS.get(resource_key, _COMMON_FIELDS)
    terms = [t for t in _split_unescaped(text, ",") if t.strip()]
    requirements = tuple(_parse_field_term(term) for term in terms)
    for requirement in requirements:
        if requirement.field not in getters:
            supported = ", ".join(sorted(getters))
            raise SelectorError(f'field label not supported: "{requirement.field}" (supported: {supported})')
    return FieldSelector(requirements, getters)


# ---------------------------------------------------------------------------------------------- label selectors

_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_KEY = rf"(?:[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?/)?{_NAME}"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_TERM = re.compile(rf"^({_KEY})\s+(in|notin)\s*\(([^)]*)\)$")
_EQUALITY_TERM = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_ORDER_TERM = re.compile(rf"^({_KEY})\s*(<|>)\s*(-?[0-9]+)$")
_EXISTS_TERM = re.compile(rf"^(!?)\s*({_KEY})$")


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    operator: str  # "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        if self.operator == "in":
            return present and value in self.values
        if self.operator == "notin":
            return not present or value not in self.values
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        return present and _compare_integer(value, self.operator, int(self.values[0]))


def _compare_integer(value: str, operator: str, bound: int) -> bool:
    try:
        number = int(value)
    except ValueError:
        return False
    return number > bound if operator == "gt" else number < bound


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[LabelRequirement, ...]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return all(r.matches(labels or {}) for r in self.requirements)


def _split_outside_parentheses(text: str) -> list[str]:
    terms, current, depth = [], "", 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return terms


def _parse_label_term(term: str) -> LabelRequirement:
    if match := _SET_TERM.match(term):
        values = tuple(v.strip() for v in match.group(3).split(","))
        if not all(re.fullmatch(_VALUE, v) for v in values):
            raise SelectorError(f"invalid label selector value in '{term}'")
        return LabelRequirement(match.group(1), match.group(2), values)
    if match := _EQUALITY_TERM.match(term):
        operator = "notin" if match.group(2) == "!=" else "in"
        return LabelRequirement(match.group(1), operator, (match.group(3),))
    if match := _ORDER_TERM.match(term):
        return LabelRequirement(match.group(1), "gt" if match.group(2) == ">" else "lt", (match.group(3),))
    if match := _EXISTS_TERM.match(term):
        return LabelRequirement(match.group(2), "!" if match.group(1) else "exists")
    raise SelectorError(
        f"unable to parse requirement '{term}': expected key, !key, key=value, key!=value, "
        "key in (a,b) or key notin (a,b)"
    )


def parse_label_selector(text: str) -> LabelSelector:
    """`app=x,tier in (a,b),!legacy`; an empty string selects everything."""
    terms = [t.strip() for t in _split_outside_parentheses(text)]
    return LabelSelector(tuple(_parse_label_term(t) for t in terms if t))


def label_selector_from_object(selector: JsonDict | None) -> LabelSelector | None:
    """A metav1.LabelSelector (matchLabels + matchExpressions); None (a nil selector) selects nothing."""
    if selector is None:
        return None
    requirements = [LabelRequirement(k, "in", (v,)) for k, v in (selector.get("matchLabels") or {}).items()]
    operators = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expression in selector.get("matchExpressions") or []:
        operator = operators.get(expression.get("operator", ""))
        if operator is None:
            raise SelectorError(f"matchExpressions operator {expression.get('operator')!r} is not one of {operators}")
        requirements.append(LabelRequirement(expression["key"], operator, tuple(expression.get("values") or ())))
    return LabelSelector(tuple(requirements))
