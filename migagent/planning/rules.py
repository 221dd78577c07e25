"""Rules a set of GPU instances must satisfy beyond non-overlapping placements.

These are properties of the multiset alone (every desired GI ends up existing), so they are
checked once, before any placement search: known profiles, per-profile instance limits,
media-engine exclusivity (docs/nvml.md §5) and packable compute instances (docs/nvml.md §8).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from migagent.catalog.model import GiProfile, MediaAttribute, Placement, ProfileTable
from migagent.layout.desired import DesiredGi
from migagent.planning.naming import ci_name, describe_desired, gi_name
from migagent.planning.packing import Packer, PackItem


def place_compute_instances(gi: GiProfile, ci_profile_ids: Sequence[int]) -> tuple[tuple[int, Placement], ...] | None:
    """Legal, non-overlapping GI-relative placements for the CIs, largest first; None if impossible."""
    profiles = [gi.ci_profile(ci_id) for ci_id in ci_profile_ids]
    ordered = sorted((ci for ci in profiles if ci is not None), key=lambda ci: (-ci.slices, ci.id))
    if len(ordered) != len(profiles):
        return None
    if any(count > ci.max_instances for ci, count in Counter(ordered).items()):
        return None
    packing = Packer([PackItem(key=ci.id, placements=ci.placements) for ci in ordered]).first_packing()
    if packing is None:
        return None
    return tuple((ci.id, placement) for ci, placement in zip(ordered, packing, strict=True))


def _ci_problem(table: ProfileTable, desired: DesiredGi) -> str | None:
    gi = table.gi_profile(desired.profile_id)
    if gi is None or place_compute_instances(gi, desired.ci_profile_ids) is not None:
        return None
    offered = ", ".join(
        f"{ci_name(table, gi, ci.id)} (up to {ci.max_instances} at {'/'.join(map(str, ci.placements))})"
        for ci in gi.ci_profiles
    )
    return (
        f"the compute instances of {describe_desired(table, desired)} do not fit in its"
        f" {gi.slices} compute slices; a {gi_name(table, gi.id)} GI offers {offered}"
    )


def _media_conflict(profiles: Sequence[GiProfile]) -> bool:
    exclusive = [p for p in profiles if p.media in (MediaAttribute.ME, MediaAttribute.ME_ALL)]
    if len(exclusive) > 1:
        return True
    with_all = any(p.media is MediaAttribute.ME_ALL for p in profiles)
    return with_all and any(p.media not in (MediaAttribute.ME_ALL, MediaAttribute.NO_ME) for p in profiles)


def _over_limit(profiles: Sequence[GiProfile]) -> GiProfile | None:
    counts = Counter(p.id for p in profiles)
    return next((p for p in profiles if counts[p.id] > p.max_instances), None)


def rules_allow(table: ProfileTable, profiles: Sequence[GiProfile]) -> bool:
    """The fast yes/no form of multiset_problem, for known profiles whose CIs already pack."""
    return (
        sum(p.memory_slices for p in profiles) <= table.memory_slices
        and _over_limit(profiles) is None
        and not _media_conflict(profiles)
    )


def _media_problem(table: ProfileTable, profiles: Sequence[GiProfile]) -> str | None:
    if not _media_conflict(profiles):
        return None
    holders = [p for p in profiles if p.media in (MediaAttribute.ME, MediaAttribute.ME_ALL)]
    if len(holders) > 1:
        names = " + ".join(gi_name(table, p.id) for p in holders)
        return f"at most one GI may hold the media engines (+me / +me.all), requested {names}"
    return f"a {gi_name(table, holders[0].id)} GI can share the GPU only with -me GIs"


def multiset_problem(table: ProfileTable, desired: Sequence[DesiredGi], *, check_cis: bool = True) -> str | None:
    """Why this multiset can never exist on the GPU, placements aside; None if the rules allow it.

    check_cis=False skips the compute-instance packing, for callers that checked each kind already.
    """
    unknown = next((gi.profile_id for gi in desired if table.gi_profile(gi.profile_id) is None), None)
    if unknown is not None:
        offered = ", ".join(f"{gi_name(table, p.id)} (id {p.id})" for p in table.gi_profiles)
        return f"GI profile id {unknown} is not offered by this GPU; it offers {offered}"
    profiles = [p for p in (table.gi_profile(gi.profile_id) for gi in desired) if p is not None]
    over = _over_limit(profiles)
    if over is not None:
        count = sum(p.id == over.id for p in profiles)
        return f"{gi_name(table, over.id)} allows at most {over.max_instances} instance(s), {count} requested"
    media = _media_problem(table, profiles)
    if media is not None:
        return media
    for gi in sorted(set(desired)) if check_cis else ():
        problem = _ci_problem(table, gi)
        if problem is not None:
            return problem
    needed = sum(p.memory_slices for p in profiles)
    if needed > table.memory_slices:
        return f"it needs {needed} memory slices, the GPU has {table.memory_slices}"
    return None
