"""Equality-based label selectors matched here, so one list of a node's pods serves several selectors.

Waiting for the GPU Operator's components to leave polls four selectors; asking the API server once
per selector per poll made the wait's cost grow with the components. `parse_equality` accepts the
equality-based grammar (`k=v`, `k==v`, `k!=v`, `k`, `!k`, comma-joined); a set-based selector
(`k in (a,b)`) returns None and the caller asks the server to match it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

Matcher = Callable[[Mapping[str, str]], bool]

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_TERM = re.compile(rf"^\s*(?P<not>!)?\s*(?P<key>{_KEY})\s*(?:(?P<op>==|=|!=)\s*(?P<value>{_VALUE}))?\s*$")


def parse_equality(selector: str) -> Matcher | None:
    """A function telling whether labels match `selector`; None when it is not equality-based."""
    checks: list[Matcher] = []
    for term in selector.split(","):
        match = _TERM.match(term)
        if match is None or (match["not"] and match["op"]):
            return None
        checks.append(_check(match["key"], match["op"], match["value"] or "", negated=bool(match["not"])))
    return lambda labels: all(check(labels) for check in checks)


def _check(key: str, op: str | None, value: str, *, negated: bool) -> Matcher:
    if op is None:
        return (lambda labels: key not in labels) if negated else (lambda labels: key in labels)
    if op == "!=":
        return lambda labels: labels.get(key) != value
    return lambda labels: labels.get(key) == value
