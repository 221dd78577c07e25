"""Turn one GPU's requested profile counts into GPU instances, as mig-parted's apply does.

Counts are compute-instance counts. The requested profiles are flattened into one item per CI,
largest first, and each CI joins the most recently started GI of its GI profile when it still fits
there; otherwise it starts a new GI. So `"1c.3g.40gb": 3` is one 3g GI with three 1c CIs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from migagent.catalog.model import CiProfile, GiProfile, Placement, ProfileTable
from migagent.layout.profile import MigProfile, ci_profile_name, gi_profile_name


class ProfileNotOfferedError(ValueError):
    """A syntactically valid profile name that this GPU does not offer; the message lists what it does."""


@dataclass(frozen=True)
class ResolvedProfile:
    """A profile name bound to one GPU's GI profile and the CI profile inside it."""

    profile: MigProfile
    gi: GiProfile
    ci: CiProfile


@dataclass(frozen=True)
class PackedGi:
    gi: GiProfile
    cis: tuple[CiProfile, ...]


def offered_gi_names(table: ProfileTable) -> tuple[str, ...]:
    return tuple(str(gi_profile_name(gi, table)) for gi in table.gi_profiles)


def resolve_profile(profile: MigProfile, table: ProfileTable) -> ResolvedProfile:
    """Find `profile` in this GPU's table; C == G names the GI's default CI, C < G a smaller CI."""
    gi_wanted = MigProfile(g=profile.g, gb=profile.gb, c=profile.g, media=profile.media)
    gi = next((gi for gi in table.gi_profiles if gi_profile_name(gi, table) == gi_wanted), None)
    if gi is None:
        offered = ", ".join(offered_gi_names(table)) or "no MIG profiles"
        raise ProfileNotOfferedError(f"this GPU offers {offered}")
    if profile.is_full_gi:
        return ResolvedProfile(profile=profile, gi=gi, ci=gi.default_ci)
    ci = next((ci for ci in gi.ci_profiles if not ci.is_default and ci.slices == profile.c), None)
    if ci is None:
        offered = ", ".join(str(ci_profile_name(gi, c, table)) for c in gi.ci_profiles)
        raise ProfileNotOfferedError(f"its GPU instance {gi_wanted} offers compute profiles {offered}")
    return ResolvedProfile(profile=profile, gi=gi, ci=ci)


def flatten(requested: Sequence[tuple[ResolvedProfile, int]]) -> list[ResolvedProfile]:
    """One item per compute instance, in mig-parted's creation order: G desc, C desc, attributes.

    Memory (GB desc) breaks the remaining ties so the order never depends on the file's order.
    """
    items = [item for item, count in requested for _ in range(count)]
    return sorted(items, key=lambda r: (-r.profile.g, -r.profile.c, r.profile.media.value, -r.profile.gb))


def pack_compute_instances(flat: Sequence[ResolvedProfile]) -> tuple[PackedGi, ...]:
    packed: list[PackedGi] = []
    latest_by_gi_profile: dict[int, int] = {}
    for item in flat:
        latest = latest_by_gi_profile.get(item.gi.id)
        if latest is not None and cis_fit(item.gi, (*packed[latest].cis, item.ci)):
            packed[latest] = PackedGi(gi=item.gi, cis=(*packed[latest].cis, item.ci))
            continue
        packed.append(PackedGi(gi=item.gi, cis=(item.ci,)))
        latest_by_gi_profile[item.gi.id] = len(packed) - 1
    return tuple(packed)


def cis_fit(gi: GiProfile, cis: Sequence[CiProfile]) -> bool:
    """Whether these CIs can coexist in one GI: instance limits, then a legal non-overlapping placement."""
    per_profile = Counter(ci.id for ci in cis)
    if any(per_profile[ci.id] > ci.max_instances for ci in cis):
        return False
    if sum(ci.slices for ci in cis) > gi.slices:
        return False
    # Largest first keeps the search tiny; a GI has at most 8 compute slices.
    ordered = sorted(cis, key=lambda ci: -ci.slices)
    return _place(ordered, taken=())


def _place(cis: Sequence[CiProfile], taken: tuple[Placement, ...]) -> bool:
    if not cis:
        return True
    first, rest = cis[0], cis[1:]
    for placement in first.placements:
        if not any(placement.overlaps(other) for other in taken) and _place(rest, (*taken, placement)):
            return True
    return False
