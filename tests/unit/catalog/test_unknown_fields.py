"""Catalog fields never seen on hardware are marked unknown (H20 SM counts), and doctor's diff asks
for NVML's value instead of calling it a mismatch against a guess."""

from __future__ import annotations

from dataclasses import replace

from migagent.catalog import model_by_key
from migagent.layout.catalog_diff import diff_profiles


def test_every_h20_gi_row_marks_its_sm_count_unknown() -> None:
    rows = model_by_key("H20-96GB").profiles.gi_profiles
    assert rows
    assert all("sms" in gi.unknown for gi in rows)
    assert all(not gi.unknown for gi in model_by_key("H100-80GB-SXM").profiles.gi_profiles)


def test_a_reported_sm_count_for_an_unknown_field_is_asked_for_not_called_wrong() -> None:
    row = model_by_key("H20-96GB")
    reported = replace(
        row.profiles, gi_profiles=tuple(replace(gi, sms=gi.sms // 2) for gi in row.profiles.gi_profiles)
    )
    lines = diff_profiles(reported, row, ci_profiles_read=())
    sms_lines = [line for line in lines if " sms: " in line]
    assert len(sms_lines) == len(row.profiles.gi_profiles)
    assert all("the catalog does not know this value" in line for line in sms_lines)
