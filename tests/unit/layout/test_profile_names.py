"""Profile names: the grammar round-trips, and GB figures follow go-nvlib's rounding (docs/mig-parted.md §2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migagent.catalog import MediaAttribute, model_by_key
from migagent.layout.profile import MigProfile, ci_profile_name, derived_memory_gb, gi_profile_name


@st.composite
def profiles(draw: st.DrawFn) -> MigProfile:
    g = draw(st.integers(1, 8))
    return MigProfile(
        g=g, gb=draw(st.integers(1, 400)), c=draw(st.integers(1, g)), media=draw(st.sampled_from(MediaAttribute))
    )


@given(profiles())
def test_a_profile_written_out_parses_back_to_itself(profile: MigProfile) -> None:
    assert MigProfile.parse(str(profile)) == profile


@given(profiles())
def test_the_written_form_is_canonical(profile: MigProfile) -> None:
    text = str(profile)
    assert str(MigProfile.parse(text)) == text
    assert text.startswith(f"{profile.c}c.") != profile.is_full_gi


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1g.10gb", MigProfile(g=1, gb=10, c=1)),
        ("1c.3g.40gb", MigProfile(g=3, gb=40, c=1)),
        ("3c.3g.40gb", MigProfile(g=3, gb=40, c=3)),
        ("1g.10gb+me", MigProfile(g=1, gb=10, c=1, media=MediaAttribute.ME)),
        ("1g.24gb+me.all", MigProfile(g=1, gb=24, c=1, media=MediaAttribute.ME_ALL)),
        ("1g.24gb-me", MigProfile(g=1, gb=24, c=1, media=MediaAttribute.NO_ME)),
        ("2g.48gb+gfx", MigProfile(g=2, gb=48, c=2, media=MediaAttribute.GFX)),
        ("1c.2g.12gb+me", MigProfile(g=2, gb=12, c=1, media=MediaAttribute.ME)),
    ],
)
def test_names_from_mig_parted_files_parse(text: str, expected: MigProfile) -> None:
    assert MigProfile.parse(text) == expected


@pytest.mark.parametrize(
    ("total_mb", "gi_mb", "gb"),
    [
        (40960, 4864, 5), (40960, 9856, 10), (40960, 19968, 20), (40960, 40192, 40),
        (81920, 9856, 10), (81920, 10240, 10), (81920, 19968, 20), (81920, 40192, 40), (81920, 80384, 80),
        (81559, 9856, 10), (81559, 9984, 10), (81559, 19968, 20), (81559, 40192, 40), (81559, 80384, 80),
        (24576, 5836, 6), (24576, 11672, 12), (24576, 23344, 24),
    ],
)
def test_gi_memory_rounds_up_to_eighths_of_the_devices_whole_gib(total_mb: int, gi_mb: int, gb: int) -> None:
    assert derived_memory_gb(gi_mb, total_mb) == gb


def test_the_full_80gb_gi_is_named_7g_80gb_not_7g_79gb() -> None:
    model = model_by_key("A100-80GB")
    full = max(model.profiles.gi_profiles, key=lambda gi: gi.slices)
    assert str(gi_profile_name(full, model.profiles)) == "7g.80gb"


def test_catalog_a30_names_match_mig_parteds_list() -> None:
    table = model_by_key("A30-24GB").profiles
    assert [str(gi_profile_name(gi, table)) for gi in table.gi_profiles] == [
        "1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb",
    ]


def test_compute_profile_names_carry_their_slice_count_except_the_default() -> None:
    table = model_by_key("A100-40GB").profiles
    three_g = next(gi for gi in table.gi_profiles if gi.slices == 3)
    assert [str(ci_profile_name(three_g, ci, table)) for ci in three_g.ci_profiles] == [
        "1c.3g.20gb", "2c.3g.20gb", "3g.20gb",
    ]
