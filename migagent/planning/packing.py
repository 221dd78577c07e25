"""Exact packing of placements into a row of slots, shared by GI and CI placement.

Both problems are tiny (a GPU has at most 8 memory slices, a GI at most 7 compute slices), so an
exhaustive depth-first search with a memo on (item index, occupied mask, lowest allowed start) is
exact and cheap. Items are searched in the order given and placements by ascending start, so the
first complete packing found is the lexicographically lowest one: the result is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from migagent.catalog.model import Placement


def placement_mask(placement: Placement) -> int:
    return ((1 << placement.size) - 1) << placement.start


@dataclass(frozen=True)
class PackItem:
    """One thing to place. `key` groups interchangeable items: equal keys get increasing starts."""

    key: object
    placements: tuple[Placement, ...]


@dataclass
class Packer:
    """Answers "can items[i:] still be placed?" with a memo, for any occupied mask."""

    items: Sequence[PackItem]
    _memo: dict[tuple[int, int, int], bool] = field(default_factory=dict)

    def candidates(self, index: int, occupied: int, min_start: int) -> list[Placement]:
        return [
            p for p in sorted(self.items[index].placements) if p.start >= min_start and not placement_mask(p) & occupied
        ]

    def min_start(self, index: int, previous: Placement | None) -> int:
        """Interchangeable neighbours take increasing starts, so each packing is searched only once."""
        if previous is None or index == 0 or self.items[index - 1].key != self.items[index].key:
            return 0
        return previous.start + 1

    def completable(self, index: int, occupied: int, previous: Placement | None) -> bool:
        if index == len(self.items):
            return True
        min_start = self.min_start(index, previous)
        memo_key = (index, occupied, min_start)
        cached = self._memo.get(memo_key)
        if cached is None:
            cached = any(
                self.completable(index + 1, occupied | placement_mask(p), p)
                for p in self.candidates(index, occupied, min_start)
            )
            self._memo[memo_key] = cached
        return cached

    def first_packing(self) -> tuple[Placement, ...] | None:
        """The lexicographically lowest packing (by item order), or None when none exists."""
        chosen: list[Placement] = []
        occupied = 0
        previous: Placement | None = None
        for index in range(len(self.items)):
            min_start = self.min_start(index, previous)
            step = next(
                (
                    p
                    for p in self.candidates(index, occupied, min_start)
                    if self.completable(index + 1, occupied | placement_mask(p), p)
                ),
                None,
            )
            if step is None:
                return None
            chosen.append(step)
            occupied |= placement_mask(step)
            previous = step
        return tuple(chosen)
