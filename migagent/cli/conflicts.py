"""Flags that contradict each other, refused in one line before a command reads or writes anything.

A default taken from the environment (MIGAGENT_SIMULATE, NVIDIA_DRIVER_ROOT...) is the setting of
the place the command runs in, not a choice on this command line, so only flags given on the
command line are compared: every parser records which of its flags were given (`record_given`).
Each command declares its contradictions as data with `refuse_together`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from migagent.errors import UsageError

GIVEN = "given_flags"
"""The namespace attribute holding the destinations of the flags given on the command line."""
_CONFLICTS = "flag_conflicts"


class ConflictingFlagsError(UsageError):
    """Two flags given together that contradict each other (exit 2, as argparse's own usage errors)."""


@dataclass(frozen=True)
class Conflict:
    """`flag` with any of `others` is refused; `why` says what each one means, so the user can choose."""

    flag: str
    others: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class Needs:
    """`flag` does nothing unless `needed` is on (given, or set by its environment variable): refused alone."""

    flag: str
    needed: str
    why: str


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def given(args: argparse.Namespace, flag: str) -> bool:
    """Whether `flag` (spelt `--like-this`) was given on the command line."""
    return _dest(flag) in getattr(args, GIVEN, frozenset())


def _recording(base: type[argparse.Action]) -> type[argparse.Action]:
    class Recording(base):  # type: ignore[misc, valid-type]
        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                     option_string: str | None = None) -> None:
            super().__call__(parser, namespace, values, option_string)
            if option_string is not None:
                setattr(namespace, GIVEN, frozenset(getattr(namespace, GIVEN, frozenset())) | {self.dest})

    Recording.__name__ = f"Recording{base.__name__}"
    return Recording


_RECORDED = ("store", "store_const", "store_true", "store_false", "append", "append_const", "count", "extend")


def record_given(parser: argparse.ArgumentParser) -> None:
    """Make every flag of `parser` record, when given, its destination in the namespace's `given_flags`."""
    for name in _RECORDED:
        base = parser._registry_get("action", name, None)
        if base is not None:
            parser.register("action", name, _recording(base))
    parser.register("action", None, parser._registry_get("action", "store", None))


def refuse_together(parser: argparse.ArgumentParser, *conflicts: Conflict | Needs) -> None:
    """Declare contradictions of `parser`'s flags; checked by `check_conflicts` once parsed."""
    parser.set_defaults(**{_CONFLICTS: (*(parser.get_default(_CONFLICTS) or ()), *conflicts)})


def check_conflicts(args: argparse.Namespace) -> None:
    """Raise ConflictingFlagsError for the first declared contradiction the command line holds."""
    conflicts: Sequence[Conflict | Needs] = getattr(args, _CONFLICTS, None) or ()
    for conflict in conflicts:
        if not given(args, conflict.flag):
            continue
        if isinstance(conflict, Needs):
            if not getattr(args, _dest(conflict.needed), None):
                raise ConflictingFlagsError(f"{conflict.flag} does nothing without {conflict.needed}: {conflict.why}")
            continue
        clash = next((other for other in conflict.others if given(args, other)), None)
        if clash is not None:
            raise ConflictingFlagsError(f"{conflict.flag} and {clash} contradict each other: {conflict.why}; give one")
