"""What a rollout is started with (the flags of `rollout start`), and the rule for each value: one
rule per value, shared by the flags (checked before anything is read or written) and by the reader
of the state object (a hand-edited object is held to the same rules).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from migagent.rollout.budget import MaxUnavailable

_NAME = re.compile(r"[a-z0-9]([-.a-z0-9]*[a-z0-9])?")
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_NAME_MAX = 63  # the rollout's name is also a label value on its state object
DEFAULT_MAX_UNAVAILABLE = MaxUnavailable(8)
ADVICE_LAYOUT = "<advice>"
"""RolloutSpec.layout of a rollout started from advice: each node has its own target (never a config name)."""


class SpecValueError(ValueError):
    """A value no rollout can run with; the message says what would be valid, not where it came from."""


def _named(text: str, pattern: re.Pattern[str], what: str) -> str:
    if len(text) > _NAME_MAX or pattern.fullmatch(text) is None:
        raise SpecValueError(
            f"{text!r}: {what}, starting and ending with a letter or digit, at most {_NAME_MAX} characters"
        )
    return text


def rollout_name(text: str) -> str:
    return _named(text, _NAME, "give lower-case letters, digits, '-' and '.' (it names migagent-rollout-NAME)")


def namespace_name(text: str) -> str:
    return _named(text, _NAMESPACE, "a namespace name is lower-case letters, digits and '-'")


def node_count(value: int) -> int:
    """--canary, --failure-budget: a whole number of nodes, at least 1."""
    if value < 1:
        raise SpecValueError(f"must be at least 1, got {value}")
    return value


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise SpecValueError(f"must be a finite number of seconds, got {value}")
    return value


def positive_seconds(value: float) -> float:
    """--lease, --poll: a wait of zero would spin (or give the lease away at once)."""
    if _finite(value) <= 0:
        raise SpecValueError(f"must be more than 0 seconds, got {value:g}")
    return value


def seconds(value: float) -> float:
    """--soak: zero (no wait) or more."""
    if _finite(value) < 0:
        raise SpecValueError(f"must be 0 or more seconds, got {value:g}")
    return value


@dataclass(frozen=True)
class RolloutSpec:
    selector: str
    layout: str
    max_unavailable: MaxUnavailable = DEFAULT_MAX_UNAVAILABLE
    canary: int = 1
    soak_s: float = 0.0
    failure_budget: int = 1
    lease_s: float = 30.0

    def flags(self) -> tuple[str, ...]:
        """The `rollout start` flags that give this spec, as typed: what a start of the same name must repeat."""
        return (
            f"-l {self.selector}" if self.selector else "--all",
            "--from-advice" if self.layout == ADVICE_LAYOUT else f"-c {self.layout}",
            f"--max-unavailable {self.max_unavailable.flag}", f"--canary {self.canary}", f"--soak {self.soak_s:g}",
            f"--failure-budget {self.failure_budget}", f"--lease {self.lease_s:g}",
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "selector": self.selector,
            "layout": self.layout,
            "max_unavailable": self.max_unavailable.flag,
            "canary": self.canary,
            "soak_s": self.soak_s,
            "failure_budget": self.failure_budget,
            "lease_s": self.lease_s,
        }
