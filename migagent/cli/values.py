"""One parser per kind of value, for every command's flags and environment variables: a value no
command can use is one line naming the flag (argparse's refusal, exit 2) or the variable, and what
would be valid. The rules are the rollout's (rollout/spec.py), which a hand-edited state object is
held to as well.

    SECONDS, POSITIVE_SECONDS  a finite number of seconds, >= 0 or > 0: `nan`, `inf` and `-5` are refused
    WHOLE_SECONDS              a whole number of seconds, >= 0
    COUNT                      a whole number, at least 1
    PORT                       a TCP port, 0 (any) to 65535
    env_flag(NAME)             a boolean from the environment, spelt as Go's ParseBool (mig-parted) takes it
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TypeVar

from migagent.errors import UsageError
from migagent.rollout.spec import SpecValueError, node_count, positive_seconds, seconds

T = TypeVar("T")
V = TypeVar("V")


def checked(convert: Callable[[str], V], rule: Callable[[V], T], expected: str) -> Callable[[str], T]:
    """An argparse type: `convert` the text (else "expected ..."), then hold it to `rule`."""

    def parse(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        try:
            return rule(value)
        except ValueError as error:  # the rule's SpecValueError or BudgetSpecError
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def _port(value: int) -> int:
    if not 0 <= value <= 65535:
        raise SpecValueError(f"a port is 0 (any free one) to 65535, got {value}")
    return value


SECONDS = checked(float, seconds, "a number of seconds")
POSITIVE_SECONDS = checked(float, positive_seconds, "a number of seconds")
WHOLE_SECONDS = checked(int, seconds, "a whole number of seconds")
COUNT = checked(int, node_count, "a whole number")
PORT = checked(int, _port, "a port number")

_TRUE = {"1", "t", "true", "yes", "on"}
_FALSE = {"", "0", "f", "false", "no", "off"}


def env_flag(name: str) -> bool:
    """A boolean from the environment (unset: false); anything but ParseBool's spellings is refused."""
    value = os.environ.get(name, "").strip().lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise UsageError(f"environment variable {name}={value!r}: expected true or false (1, t, yes, on; 0, f, no, off)")
