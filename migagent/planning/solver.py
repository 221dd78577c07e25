"""Exact GPU-instance placement: where every desired GI goes, keeping as many existing GIs as possible.

The search runs over the desired GIs, largest first, trying each legal placement by ascending
start. A desired GI placed exactly where an existing GI of the same profile and the same CI
multiset sits keeps that GI. Branch and bound optimises lexicographically: first the most
workloads kept (pods on a GI, from PodResources, else 1 for a GI NVML sees processes on), i.e.
the fewest pods evicted; then the most GIs kept, i.e. the fewest destroyed. Among equal scores the
first packing found, i.e. the lowest starts for the largest GIs, wins. A memo of which partial packings can
still be completed prunes dead ends, so the search finds a placement whenever one exists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from migagent.catalog.model import Placement, ProfileTable
from migagent.layout.desired import DesiredGi
from migagent.layout.equivalence import instance_identity
from migagent.layout.observed import ObservedGi
from migagent.planning.naming import describe_desired, largest_first
from migagent.planning.packing import Packer, PackItem, placement_mask
from migagent.planning.rules import multiset_problem, rules_allow

# closest_fitting tries dropping up to this many instances one level at a time before listing all.
_CHEAP_DROP_LEVELS = 2


@dataclass(frozen=True)
class PlacedGi:
    """A desired GI at its target placement; `kept` is the existing GI it reuses, if any."""

    desired: DesiredGi
    placement: Placement
    kept: ObservedGi | None = None


@dataclass(frozen=True)
class Solution:
    placed: tuple[PlacedGi, ...]  # largest first
    destroyed: tuple[ObservedGi, ...]  # by placement

    @property
    def kept(self) -> tuple[ObservedGi, ...]:
        return tuple(sorted((p.kept for p in self.placed if p.kept is not None), key=lambda gi: gi.placement))

    @property
    def created(self) -> tuple[PlacedGi, ...]:
        return tuple(p for p in self.placed if p.kept is None)


def _packer(table: ProfileTable, ordered: Sequence[DesiredGi]) -> Packer:
    items = []
    for gi in ordered:
        profile = table.gi_profile(gi.profile_id)
        items.append(PackItem(key=gi, placements=profile.placements if profile is not None else ()))
    return Packer(items)


@dataclass
class _KeepSearch:
    """Branch and bound over the packer's tree, scoring kept existing GIs."""

    packer: Packer
    ordered: tuple[DesiredGi, ...]
    existing: Sequence[ObservedGi]
    workloads: Mapping[Placement, int] = field(default_factory=dict)
    """Pods holding each existing GI, by placement (from PodResources); absent: none known."""
    table: ProfileTable | None = None
    best_score: int = -1
    best: tuple[Placement, ...] = ()
    _bound_suffix: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        # One kept workload outweighs every kept idle GI together: fewest evicted first, then fewest destroyed.
        self._workload_weight = len(self.existing) + 1
        potentials = [max((self.keep_weight(gi, e) for e in self.existing), default=0) for gi in self.ordered]
        self._bound_suffix = [sum(potentials[i:]) for i in range(len(potentials) + 1)]

    def keep_weight(self, desired: DesiredGi, existing: ObservedGi) -> int:
        """0 unless `existing` is `desired` to NVIDIA's tools (same GI profile, same CI sizes: see
        layout.equivalence), so a GI whose CIs have another profile number of the same size stays."""
        table = self.table
        if instance_identity(table, existing.profile_id, existing.ci_profile_ids) != instance_identity(
            table, desired.profile_id, desired.ci_profile_ids
        ):
            return 0
        return self._workload_weight * self.load(existing) + 1

    def load(self, existing: ObservedGi) -> int:
        """The workloads destroying this GI would stop: its pods, else 1 when NVML sees processes on it."""
        return max(self.workloads.get(existing.placement, 0), 1 if existing.processes else 0)

    def weight_at(self, desired: DesiredGi, placement: Placement) -> int:
        return max((self.keep_weight(desired, e) for e in self.existing if e.placement == placement), default=0)

    def run(self, index: int, occupied: int, chosen: tuple[Placement, ...], score: int) -> None:
        if score + self._bound_suffix[index] <= self.best_score:
            return  # cannot beat (or, being later in search order, tie) the best found
        if index == len(self.ordered):
            self.best_score, self.best = score, chosen
            return
        previous = chosen[-1] if chosen else None
        for placement in self.packer.candidates(index, occupied, self.packer.min_start(index, previous)):
            taken = occupied | placement_mask(placement)
            if self.packer.completable(index + 1, taken, placement):
                gain = self.weight_at(self.ordered[index], placement)
                self.run(index + 1, taken, (*chosen, placement), score + gain)


def solve(
    table: ProfileTable,
    *,
    existing: Sequence[ObservedGi],
    desired: Sequence[DesiredGi],
    workloads: Mapping[Placement, int] | None = None,
) -> Solution | None:
    """Target placements for `desired` evicting the fewest workloads, then keeping the most of
    `existing`; None when it cannot fit. `workloads`: pods per existing GI placement."""
    if multiset_problem(table, desired) is not None:
        return None
    ordered = largest_first(table, desired)
    search = _KeepSearch(
        packer=_packer(table, ordered),
        ordered=ordered,
        existing=existing,
        workloads=dict(workloads or {}),
        table=table,
    )
    if not search.packer.completable(0, 0, None):
        return None
    search.run(0, 0, (), 0)
    placed: list[PlacedGi] = []
    kept_ids: set[int] = set()
    for gi, placement in zip(ordered, search.best, strict=True):
        match = next((e for e in existing if e.placement == placement and search.keep_weight(gi, e) > 0), None)
        if match is not None:
            kept_ids.add(id(match))
        placed.append(PlacedGi(desired=gi, placement=placement, kept=match))
    destroyed = tuple(sorted((e for e in existing if id(e) not in kept_ids), key=lambda gi: gi.placement))
    return Solution(placed=tuple(placed), destroyed=destroyed)


def placement_problem(table: ProfileTable, desired: Sequence[DesiredGi]) -> str | None:
    """Why `desired` cannot exist on an empty GPU of this table; None when it fits."""
    problem = multiset_problem(table, desired)
    if problem is not None:
        return problem
    ordered = largest_first(table, desired)
    if _packer(table, ordered).completable(0, 0, None):
        return None
    legal = "; ".join(
        f"{describe_desired(table, gi)} at {' '.join(map(str, p.placements))}"
        for gi in dict.fromkeys(ordered)
        if (p := table.gi_profile(gi.profile_id)) is not None
    )
    return f"no choice of legal placements avoids overlap in {table.memory_slices} memory slices ({legal})"


def fits(table: ProfileTable, desired: Sequence[DesiredGi]) -> bool:
    """Whether this multiset of GIs can exist at once on an empty GPU of this table."""
    return placement_problem(table, desired) is None


def default_gi(table: ProfileTable, profile_id: int) -> DesiredGi:
    """A GI of this profile holding one full (default) compute instance."""
    profile = table.gi_profile(profile_id)
    if profile is None:
        raise KeyError(f"GI profile id {profile_id} is not in this profile table")
    return DesiredGi(profile_id=profile_id, ci_profile_ids=(profile.default_ci.id,))


def _fitting_sub_multisets(
    table: ProfileTable, kinds: Sequence[DesiredGi], counts: Sequence[int]
) -> list[tuple[DesiredGi, ...]]:
    """Every multiset with at most counts[i] of kinds[i] that fits; `kinds` must be largest first.

    Fitting is monotone (a subset of a fitting multiset fits), so once n of a kind fail, more of
    it fail too: the search visits only fitting multisets and their immediate failures. Each kind
    is checked alone first (known profile, packable CIs), so candidates need only the cheap rules.
    """
    profiles = {kind: table.gi_profile(kind.profile_id) for kind in kinds}
    usable = [n if multiset_problem(table, [kind]) is None else 0 for kind, n in zip(kinds, counts, strict=True)]
    found: list[tuple[DesiredGi, ...]] = []

    def acceptable(candidate: tuple[DesiredGi, ...]) -> bool:
        resolved = [p for p in (profiles[gi] for gi in candidate) if p is not None]
        items = [PackItem(key=gi, placements=p.placements) for gi, p in zip(candidate, resolved, strict=True)]
        return rules_allow(table, resolved) and Packer(items).completable(0, 0, None)

    def extend(index: int, chosen: tuple[DesiredGi, ...]) -> None:
        if index == len(kinds):
            found.append(chosen)
            return
        for count in range(usable[index] + 1):
            candidate = chosen + (kinds[index],) * count  # stays largest first: kinds are
            if count and not acceptable(candidate):
                break
            extend(index + 1, candidate)

    extend(0, ())
    return found


def enumerate_fitting_multisets(table: ProfileTable) -> list[tuple[DesiredGi, ...]]:
    """Every multiset of GI profiles (each with its default full CI) that fits on an empty GPU.

    Includes the empty multiset. Each multiset is listed largest GI first; the list is in a fixed
    order (by instance count per profile, largest profile first).
    """
    kinds = largest_first(table, (default_gi(table, p.id) for p in table.gi_profiles))
    limits = [(table.gi_profile(kind.profile_id) or table.gi_profiles[0]).max_instances for kind in kinds]
    return _fitting_sub_multisets(table, kinds, limits)


def _drop_vectors(limits: Sequence[int], total: int) -> list[tuple[int, ...]]:
    """Every way to drop `total` instances with at most limits[i] of kind i, lexicographically."""
    if not limits:
        return [()] if total == 0 else []
    head_max = min(limits[0], total)
    return [(head, *rest) for head in range(head_max + 1) for rest in _drop_vectors(limits[1:], total - head)]


def closest_fitting(table: ProfileTable, desired: Sequence[DesiredGi]) -> tuple[DesiredGi, ...]:
    """The sub-multiset of `desired` that fits after dropping the fewest instances.

    Ties keep the most memory slices, then the most compute instances (a GI split into several
    CIs counts for each), then drop the smallest GIs first, so the answer is the layout a user
    most likely meant. Returns `desired` itself (largest first) when it fits.
    Searched by the number dropped, so a layout one instance too large costs a handful of checks.
    """
    kinds = largest_first(table, set(desired))
    wanted = Counter(desired)
    # A kind that cannot exist even alone (unknown profile, unpackable CIs) is always dropped.
    keepable = [wanted[kind] if multiset_problem(table, [kind]) is None else 0 for kind in kinds]

    def remaining(drops: tuple[int, ...]) -> tuple[DesiredGi, ...]:
        return tuple(k for k, n, d in zip(kinds, keepable, drops, strict=True) for _ in range(n - d))

    def drops_of(gis: tuple[DesiredGi, ...]) -> tuple[int, ...]:
        have = Counter(gis)
        return tuple(n - have[kind] for kind, n in zip(kinds, keepable, strict=True))

    def preference(drops: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
        gis = remaining(drops)
        slices = sum(p.memory_slices for gi in gis if (p := table.gi_profile(gi.profile_id)) is not None)
        return (-slices, -sum(len(gi.ci_profile_ids) for gi in gis), drops)

    # Layouts a little too large are common and cheap to answer level by level; beyond that, list
    # every fitting sub-multiset at once (monotone search) rather than the many drop vectors.
    for total in range(min(sum(keepable), _CHEAP_DROP_LEVELS) + 1):
        fitting = [drops for drops in _drop_vectors(keepable, total) if fits(table, remaining(drops))]
        if fitting:
            return remaining(min(fitting, key=preference))
    found = _fitting_sub_multisets(table, kinds, keepable)
    best: tuple[DesiredGi, ...] = min(found, key=lambda gis: (-len(gis), *preference(drops_of(gis))))
    return best
