"""What a rollout command refuses, each said in one line with what to do (exit 1, nothing changed)."""

from __future__ import annotations

from migagent.errors import PermanentError


class RolloutError(PermanentError):
    """A rollout that cannot be started or driven as asked (one line, nothing changed)."""


class HeldElsewhereError(RolloutError):
    """Another driver holds the rollout's lease."""


class AlreadyStartedError(RolloutError):
    """Another `rollout start` created the same rollout's state object first (a race both lost to
    reading no object): that one drives it."""


class CorruptStateError(RolloutError):
    """The state object cannot be read as a rollout: it names the object, what is wrong and how to
    repair or remove it. Nothing is relabelled on its account."""
