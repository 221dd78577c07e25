"""One disruption per change: a label change during an attempt is noticed at the next safe point.

Safe points are between two NVML steps (never inside one), each turn of the drain's wait, and each
poll while waiting for the device plugin to advertise. There `LabelCheckpoint` beats the liveness
heartbeat and compares the label the watch last saw with the layout being applied; a different
layout raises `LayoutSuperseded`, and the attempt re-plans from what the GPUs hold to the new
layout, keeping its cordon and paused operands, instead of finishing, uncordoning and starting over.

A new label that names no usable layout (a typo, a layout that does not fit or would evict what
cannot be evicted) is refused only once the change in flight is finished: the GPUs are taken to
the last valid layout, advertised, and then the refusal is reported and the node released, never
left uncordoned in a mix of the old layout and the new that no one asked for.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from migagent.errors import PermanentError


class LayoutSuperseded(Exception):  # noqa: N818 - a signal, not an error: never reported as a failure
    """The Node's label now names another layout than the one being applied."""

    def __init__(self, layout: str) -> None:
        super().__init__(f"the label now asks for layout {layout}")
        self.layout = layout


@dataclass(frozen=True)
class Refused:
    """A label that arrived mid-change naming no layout this node can take, and why (its error)."""

    label: str
    error: PermanentError

    def after_finishing(self, finished: str) -> PermanentError:
        """The refusal, reported once the change in flight reached `finished`: the same error class (so
        the same condition reason), its message saying what the node holds instead."""
        reported = copy.copy(self.error)
        reported.args = (
            f"the label asks for {self.label}: {self.error}; the change in flight to {finished} was finished first,"
            f" so the node holds {finished}",
        )
        return reported


class LabelCheckpoint:
    """Called at every safe point of an attempt applying `applying`; `ignoring`: a label already found
    unusable (a typo), which the attempt finishes its change in spite of, then reports."""

    def __init__(
        self,
        current: Callable[[], str | None] | None,
        applying: str,
        *,
        heartbeat: Callable[[], None] | None = None,
        ignoring: str | None = None,
    ) -> None:
        self._current = current
        self.applying = applying
        self.ignoring = ignoring
        self._heartbeat = heartbeat
        self.checks = 0

    def __call__(self) -> None:
        self.checks += 1
        if self._heartbeat is not None:
            self._heartbeat()
        seen = self._current() if self._current is not None else None
        # A removed label (None) is not a new layout: the attempt finishes what it started.
        if seen is not None and seen not in (self.applying, self.ignoring):
            raise LayoutSuperseded(seen)
