"""Catalog rows for every GPU NVIDIA's default mig-parted config names: evidence, estimates and disputes marked."""

from __future__ import annotations

from pathlib import Path

import pytest

from migagent.catalog import (
    Confidence,
    GpuModel,
    MediaAttribute,
    all_models,
    driver_variants,
    model_by_key,
    model_by_pci_device_id,
)
from migagent.layout.parse import load_layout_file
from migagent.layout.profile import MigProfile, gi_profile_name

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "layout" / "data" / "mig-parted-default-names.yaml"
EVERY_ROW = (*all_models(), *driver_variants())
# No nvidia-smi capture of these was found: every row is an estimate.
UNCAPTURED = ("B300-288GB", "GB300-288GB", "H20-96GB", "PG506-96GB")


def _filtered_pci_ids() -> set[int]:
    layout = load_layout_file(DEFAULT_CONFIG)
    return {f.device_vendor for entries in layout.configs.values() for e in entries for f in e.device_filter}


def test_every_pci_id_the_default_config_filters_on_finds_a_catalog_model() -> None:
    missing = sorted(hex(pci) for pci in _filtered_pci_ids() if model_by_pci_device_id(pci) is None)
    assert missing == []


@pytest.mark.parametrize("model", EVERY_ROW, ids=lambda m: m.key)
def test_every_row_cites_its_evidence(model: GpuModel) -> None:
    assert model.evidence
    assert all(item.strip() for item in model.evidence)


@pytest.mark.parametrize("model", EVERY_ROW, ids=lambda m: m.key)
def test_every_row_not_captured_says_why_in_a_note(model: GpuModel) -> None:
    for gi in model.profiles.gi_profiles:
        if gi.confidence is not Confidence.OBSERVED:
            assert gi.note or model.note, (model.key, gi.id)
        if gi.disputed:
            assert gi.note, (model.key, gi.id)


@pytest.mark.parametrize("key", UNCAPTURED)
def test_models_without_any_capture_are_estimated_in_every_row(key: str) -> None:
    model = model_by_key(key)
    assert {gi.confidence for gi in model.profiles.gi_profiles} == {Confidence.ESTIMATED}
    assert model.placements_confidence is Confidence.ESTIMATED


def test_the_a30_1g_6gb_nvdec_count_is_marked_disputed_between_lgip_and_the_mig_guide() -> None:
    gi = model_by_key("A30-24GB").profiles.gi_profile(14)
    assert gi is not None
    assert gi.disputed == ("dec",)
    assert gi.engines.decoders == 1  # the -lgip capture is kept
    assert "0 NVDECs" in gi.note


def test_the_b200_2g_45gb_engines_and_1g_memory_are_marked_disputed_by_source_and_driver() -> None:
    table = model_by_key("B200-180GB").profiles
    two_g, one_g = table.gi_profile(14), table.gi_profile(19)
    assert two_g is not None
    assert one_g is not None
    assert set(two_g.disputed) == {"ce", "dec", "jpg"}
    assert one_g.disputed == ("memory_mb",)
    assert "20.50 GiB" in one_g.note


@pytest.mark.parametrize("key", ["H200-141GB", "GH200-96GB", "GH200-144GB", "B200-180GB", "GB200-186GB"])
def test_placements_assumed_equal_to_h100s_are_marked_estimated(key: str) -> None:
    assert model_by_key(key).placements_confidence is Confidence.ESTIMATED


def test_h100_placements_come_from_captures() -> None:
    assert model_by_key("H100-80GB-SXM").placements_confidence is Confidence.OBSERVED


@pytest.mark.parametrize(
    ("name", "enum_value", "profile_id", "media"),
    [
        ("1g.24gb", 0x0, 14, MediaAttribute.NONE),
        ("1g.24gb+me", 0x7, 21, MediaAttribute.ME),
        ("1g.24gb+gfx", 0xA, 47, MediaAttribute.GFX),
        ("1g.24gb-me", 0xD, 67, MediaAttribute.NO_ME),
        ("1g.24gb+me.all", 0xF, 65, MediaAttribute.ME_ALL),
        ("2g.48gb+gfx", 0xB, 35, MediaAttribute.GFX),
        ("2g.48gb-me", 0xE, 66, MediaAttribute.NO_ME),
        ("2g.48gb+me.all", 0x10, 64, MediaAttribute.ME_ALL),
        ("4g.96gb+gfx", 0xC, 32, MediaAttribute.GFX),
    ],
)
def test_rtx_pro_6000_profiles_carry_nvml_h_enums_and_captured_ids_and_names_round_trip(
    name: str, enum_value: int, profile_id: int, media: MediaAttribute
) -> None:
    table = model_by_key("RTX-PRO-6000-96GB").profiles
    gi = table.gi_profile_by_enum(enum_value)
    assert gi is not None
    assert gi.id == profile_id
    assert gi.media is media
    assert gi_profile_name(gi, table) == MigProfile.parse(name)


def test_rtx_pro_6000_me_all_takes_every_media_engine_and_minus_me_none() -> None:
    table = model_by_key("RTX-PRO-6000-96GB").profiles
    full, me_all, no_me = table.gi_profile(0), table.gi_profile(65), table.gi_profile(67)
    assert full is not None
    assert me_all is not None
    assert no_me is not None
    assert (me_all.engines.decoders, me_all.engines.encoders, me_all.engines.jpeg, me_all.engines.ofa) == (
        full.engines.decoders, full.engines.encoders, full.engines.jpeg, full.engines.ofa,
    )
    assert (no_me.engines.decoders, no_me.engines.encoders, no_me.engines.jpeg, no_me.engines.ofa) == (0, 0, 0, 0)


def test_the_early_gb200_driver_is_a_variant_with_the_same_pci_id_never_chosen_by_it() -> None:
    (variant,) = driver_variants()
    primary = model_by_key(variant.variant_of)
    assert variant.key == "GB200-189GB"
    assert variant.pci_device_ids == primary.pci_device_ids
    assert model_by_pci_device_id(0x294110DE) is primary
    assert variant not in all_models()
    names = [str(gi_profile_name(gi, variant.profiles)) for gi in variant.profiles.gi_profiles]
    assert names == ["1g.24gb", "1g.24gb+me", "1g.47gb", "2g.47gb", "3g.95gb", "4g.95gb", "7g.189gb"]
