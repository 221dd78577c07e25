"""A deliberately naive checker, independent of migagent.planning, to cross-check the solver.

It tries every combination of legal placements (itertools, no pruning beyond a slice-count
pre-check that any packing must pass) and applies the media and instance-count rules itself.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator, Sequence

from migagent.catalog.model import MediaAttribute, Placement, ProfileTable
from migagent.layout.desired import DesiredGi
from migagent.layout.observed import ObservedGi


def _rules_hold(table: ProfileTable, profile_ids: Sequence[int]) -> bool:
    counts = Counter(profile_ids)
    profiles = [table.gi_profile(i) for i in profile_ids]
    if any(p is None for p in profiles):
        return False
    if any(counts[p.id] > p.max_instances for p in profiles if p is not None):
        return False
    media = [p.media for p in profiles if p is not None]
    if sum(m in (MediaAttribute.ME, MediaAttribute.ME_ALL) for m in media) > 1:
        return False
    others = [m for m in media if m is not MediaAttribute.ME_ALL]
    return MediaAttribute.ME_ALL not in media or all(m is MediaAttribute.NO_ME for m in others)


def _disjoint(placements: Sequence[Placement]) -> bool:
    slots = [s for p in placements for s in range(p.start, p.start + p.size)]
    return len(slots) == len(set(slots))


def all_packings(table: ProfileTable, profile_ids: Sequence[int]) -> Iterator[dict[int, tuple[Placement, ...]]]:
    """Every assignment of distinct legal placements per profile with no two GIs overlapping."""
    if not _rules_hold(table, profile_ids):
        return
    counts = Counter(profile_ids)
    kinds = sorted(counts)
    profiles = {p.id: p for p in table.gi_profiles}
    if sum(profiles[k].memory_slices * counts[k] for k in kinds) > table.memory_slices:
        return
    choices = [itertools.combinations(profiles[k].placements, counts[k]) for k in kinds]
    for combo in itertools.product(*choices):
        if _disjoint([p for group in combo for p in group]):
            yield dict(zip(kinds, combo, strict=True))


def brute_fits(table: ProfileTable, profile_ids: Sequence[int]) -> bool:
    return next(all_packings(table, profile_ids), None) is not None


def brute_max_kept(table: ProfileTable, existing: Sequence[ObservedGi], desired: Sequence[DesiredGi]) -> int:
    """The most existing GIs any legal target packing of `desired` can keep in place.

    Desired GIs of one profile may differ in CI sets; assigning CI sets to placements is tried
    exhaustively too (permutations of the CI sets over the chosen placements).
    """
    best = -1
    by_profile: dict[int, list[tuple[int, ...]]] = {}
    for gi in desired:
        by_profile.setdefault(gi.profile_id, []).append(gi.ci_profile_ids)
    for packing in all_packings(table, [gi.profile_id for gi in desired]):
        kept = 0
        for profile_id, placements in packing.items():
            kept += max(
                sum(
                    any(e.profile_id == profile_id and e.placement == p and e.ci_profile_ids == cis for e in existing)
                    for p, cis in zip(placements, order, strict=True)
                )
                for order in set(itertools.permutations(by_profile[profile_id]))
            )
        best = max(best, kept)
    return best


def brute_largest_fitting_size(table: ProfileTable, profile_ids: Sequence[int]) -> int:
    """The most instances of `profile_ids` (a multiset) that can exist together."""
    counts = Counter(profile_ids)
    kinds = sorted(counts)
    best = 0
    for chosen in itertools.product(*(range(counts[k] + 1) for k in kinds)):
        if sum(chosen) > best and brute_fits(table, [k for k, n in zip(kinds, chosen, strict=True) for _ in range(n)]):
            best = sum(chosen)
    return best
