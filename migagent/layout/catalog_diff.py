"""Compare the GI/CI profiles a GPU reports through NVML with its catalog row (what `doctor` prints).

Profiles are matched by NVML profile id. Every difference is one line naming the profile, the field,
NVML's value and the catalog's, and whether the catalog already marks that value as an estimate or
as disputed between sources, so a reader knows which lines are news and which were expected.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from migagent.catalog import CiProfile, Confidence, GiProfile, GpuModel, Placement, ProfileTable
from migagent.layout.profile import gi_profile_name

_GI_FIELDS = ("enum_value", "slices", "memory_mb", "sms", "ce", "dec", "enc", "jpg", "ofa", "max_instances")
_CI_FIELDS = ("slices", "sms", "max_instances", "is_default")


def gi_values(gi: GiProfile) -> dict[str, int]:
    """A GI profile's numbers under the catalog's (models.yaml) field names."""
    engines = gi.engines
    return {
        "enum_value": gi.enum_value, "slices": gi.slices, "memory_mb": gi.memory_mb, "sms": gi.sms,
        "ce": engines.copy, "dec": engines.decoders, "enc": engines.encoders, "jpg": engines.jpeg,
        "ofa": engines.ofa, "max_instances": gi.max_instances,
    }


def placements_text(placements: Sequence[Placement]) -> str:
    return "[" + ", ".join(str(p) for p in placements) + "]"


def diff_profiles(
    reported: ProfileTable, row: GpuModel, *, ci_profiles_read: Collection[int]
) -> list[str]:
    """One line per difference between what NVML reported and the catalog row (empty: they agree)."""
    catalog = row.profiles
    lines: list[str] = []
    for gi in reported.gi_profiles:
        name = gi_profile_name(gi, reported)
        expected = catalog.gi_profile(gi.id)
        if expected is None:
            lines.append(f"GI profile {gi.id} ({name}): reported by NVML, missing from catalog row {row.key}")
            continue
        lines.extend(_gi_lines(gi, expected, reported=reported, row=row, read_cis=gi.id in ci_profiles_read))
    reported_ids = {gi.id for gi in reported.gi_profiles}
    lines.extend(
        f"GI profile {gi.id} ({gi_profile_name(gi, catalog)}): in catalog row {row.key}, not reported by NVML"
        for gi in catalog.gi_profiles
        if gi.id not in reported_ids
    )
    return lines


def _gi_lines(
    gi: GiProfile, expected: GiProfile, *, reported: ProfileTable, row: GpuModel, read_cis: bool
) -> list[str]:
    where = f"GI profile {gi.id} ({gi_profile_name(gi, reported)})"
    lines: list[str] = []
    catalog_name = gi_profile_name(expected, row.profiles)
    if catalog_name != gi_profile_name(gi, reported):
        lines.append(f"{where} name: NVML derives {gi_profile_name(gi, reported)}, catalog {catalog_name}")
    got, want = gi_values(gi), gi_values(expected)
    for field in _GI_FIELDS:
        if got[field] != want[field]:
            lines.append(f"{where} {field}: NVML {got[field]}, catalog {want[field]}{_why(expected, field)}")
    if gi.placements != expected.placements:
        marked = " (catalog placements are estimated)" if row.placements_confidence is not Confidence.OBSERVED else ""
        lines.append(
            f"{where} placements: NVML {placements_text(gi.placements)},"
            f" catalog {placements_text(expected.placements)}{marked}"
        )
    if read_cis:
        lines.extend(_ci_lines(where, gi.ci_profiles, expected.ci_profiles))
    return lines


def _why(expected: GiProfile, field: str) -> str:
    if field in expected.unknown:
        return " (the catalog does not know this value: never seen on hardware; NVML's is the one to contribute)"
    if field in expected.disputed:
        return " (catalog marks this value disputed)"
    if expected.confidence is not Confidence.OBSERVED:
        return f" (catalog row {expected.confidence.value})"
    return ""


def _ci_lines(where: str, reported: Sequence[CiProfile], expected: Sequence[CiProfile]) -> list[str]:
    lines: list[str] = []
    wanted = {ci.id: ci for ci in expected}
    for ci in reported:
        catalog_ci = wanted.pop(ci.id, None)
        if catalog_ci is None:
            lines.append(f"{where} CI profile {ci.id}: reported by NVML, missing from the catalog")
            continue
        for field in _CI_FIELDS:
            got, want = getattr(ci, field), getattr(catalog_ci, field)
            if got != want:
                lines.append(f"{where} CI profile {ci.id} {field}: NVML {got}, catalog {want}")
        if ci.placements != catalog_ci.placements:
            lines.append(
                f"{where} CI profile {ci.id} placements: NVML {placements_text(ci.placements)},"
                f" catalog {placements_text(catalog_ci.placements)}"
            )
    lines.extend(f"{where} CI profile {ci_id}: in the catalog, not reported by NVML" for ci_id in sorted(wanted))
    return lines
