"""The GPU catalog: the 10 models captured (docs/nvml.md) plus the rest of NVIDIA's default config, their
identity, tables and behaviour."""

from __future__ import annotations

import pytest

from migagent.catalog import (
    Architecture,
    Confidence,
    Engines,
    GpuModel,
    Placement,
    UnknownGpuModelError,
    all_models,
    model_by_key,
    model_by_pci_device_id,
    model_keys,
)
from migagent.layout.profile import gi_profile_name

KEYS = (
    "A100-40GB", "A100-80GB", "A30-24GB", "H100-80GB-SXM", "H100-80GB-PCIe",
    "H100-NVL-94GB", "H200-141GB", "GH200-96GB", "GH200-144GB", "B200-180GB",
    "GB200-186GB", "B300-288GB", "GB300-288GB", "RTX-PRO-6000-96GB", "H20-96GB", "PG506-96GB",
)

PCI_IDS = {
    "A100-40GB": (0x20B010DE, 0x20B110DE, 0x20F110DE, 0x20F610DE),
    "A100-80GB": (0x20B210DE, 0x20B510DE, 0x20F310DE, 0x20F510DE),
    "A30-24GB": (0x20B710DE,),
    "H100-80GB-SXM": (0x233010DE, 0x232410DE),
    "H100-80GB-PCIe": (0x233110DE, 0x232210DE),
    "H100-NVL-94GB": (0x232110DE, 0x233A10DE),
    "H200-141GB": (0x233510DE, 0x233B10DE),
    "GH200-96GB": (0x234210DE, 0x233D10DE),
    "GH200-144GB": (0x234810DE,),
    "B200-180GB": (0x290110DE,),
    "GB200-186GB": (0x294110DE,),
    "B300-288GB": (0x318210DE,),
    "GB300-288GB": (0x31C210DE,),
    "RTX-PRO-6000-96GB": (0x2BB510DE,),
    "H20-96GB": (0x232910DE,),
    "PG506-96GB": (0x20B610DE,),
}

# mig-parted's names and maximum counts for every GI profile (docs/mig-parted.md §3).
MIG_PARTED_NAMES = {
    "A100-40GB": {"1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1},
    "A100-80GB": {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    "A30-24GB": {"1g.6gb": 4, "1g.6gb+me": 1, "2g.12gb": 2, "2g.12gb+me": 1, "4g.24gb": 1},
    "H100-80GB-SXM": {
        "1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1,
    },
    "H100-80GB-PCIe": {
        "1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1,
    },
    "H100-NVL-94GB": {
        "1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2, "4g.47gb": 1, "7g.94gb": 1,
    },
    "H200-141GB": {
        "1g.18gb": 7, "1g.18gb+me": 1, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1,
    },
    "GH200-96GB": {
        "1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.48gb": 2, "4g.48gb": 1, "7g.96gb": 1,
    },
    "GH200-144GB": {
        "1g.18gb": 7, "1g.18gb+me": 1, "1g.36gb": 4, "2g.36gb": 3, "3g.72gb": 2, "4g.72gb": 1, "7g.144gb": 1,
    },
    "B200-180GB": {
        "1g.23gb": 7, "1g.23gb+me": 1, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2, "4g.90gb": 1, "7g.180gb": 1,
    },
    # The rest of NVIDIA's default config (gpu-operator @db0bb63; tests/unit/layout/data/mig-parted-default-names.yaml).
    "GB200-186GB": {
        "1g.23gb": 7, "1g.23gb+me": 1, "1g.47gb": 4, "2g.47gb": 3, "3g.93gb": 2, "4g.93gb": 1, "7g.186gb": 1,
    },
    "B300-288GB": {
        "1g.34gb": 7, "1g.34gb+me": 1, "1g.67gb": 4, "2g.67gb": 3, "3g.135gb": 2, "4g.135gb": 1, "7g.269gb": 1,
    },
    "GB300-288GB": {
        "1g.35gb": 7, "1g.35gb+me": 1, "1g.70gb": 4, "2g.70gb": 3, "3g.139gb": 2, "4g.139gb": 1, "7g.278gb": 1,
    },
    "RTX-PRO-6000-96GB": {
        "1g.24gb": 4, "1g.24gb+me": 1, "1g.24gb+gfx": 4, "1g.24gb+me.all": 1, "1g.24gb-me": 4,
        "2g.48gb": 2, "2g.48gb+gfx": 2, "2g.48gb+me.all": 1, "2g.48gb-me": 2, "4g.96gb": 1, "4g.96gb+gfx": 1,
    },
    "H20-96GB": {
        "1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.48gb": 2, "4g.48gb": 1, "7g.96gb": 1,
    },
    "PG506-96GB": {
        "1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.48gb": 2, "4g.48gb": 1, "7g.96gb": 1,
    },
}


def test_the_catalog_holds_the_reference_models_then_the_default_configs_others_under_their_keys_in_order() -> None:
    assert tuple(m.key for m in all_models()) == KEYS
    assert model_keys() == (*KEYS, "GB200-189GB")  # then the driver variants


@pytest.mark.parametrize("spelling", ["h100-80gb-sxm", "H100-80GB-SXM", "H100-80gb-Sxm", " h100-80gb-sxm "])
def test_model_keys_are_looked_up_case_insensitively(spelling: str) -> None:
    assert model_by_key(spelling).key == "H100-80GB-SXM"


def test_an_unknown_model_key_is_refused_listing_the_valid_ones() -> None:
    with pytest.raises(UnknownGpuModelError) as info:
        model_by_key("T4")
    assert str(info.value) == f"unknown GPU model 'T4'; valid models: {', '.join(KEYS)}, GB200-189GB"


@pytest.mark.parametrize("key", KEYS)
def test_each_model_has_its_pci_ids_and_is_found_by_each(key: str) -> None:
    model = model_by_key(key)
    assert model.pci_device_ids == PCI_IDS[key]
    assert model.primary_pci_device_id == PCI_IDS[key][0]
    assert {pci for pci, _name in model.names_by_pci_id} == set(PCI_IDS[key])
    for pci in PCI_IDS[key]:
        assert model_by_pci_device_id(pci) is model


def test_a_pci_id_outside_the_catalog_finds_no_model() -> None:
    assert model_by_pci_device_id(0x1EB810DE) is None  # T4: no MIG
    assert model_by_pci_device_id(0x20B0) is None  # a device id without its vendor half


@pytest.mark.parametrize("key", KEYS)
def test_every_gi_profile_is_named_and_counted_as_mig_parted_names_it(key: str) -> None:
    model = model_by_key(key)
    named = {str(gi_profile_name(gi, model.profiles)): gi.max_instances for gi in model.profiles.gi_profiles}
    assert named == MIG_PARTED_NAMES[key]


@pytest.mark.parametrize(
    ("key", "total_mb", "memory_slices", "compute_slices"),
    [
        ("A100-40GB", 40960, 8, 7),
        ("A100-80GB", 81920, 8, 7),
        ("A30-24GB", 24576, 4, 4),
        ("H100-80GB-SXM", 81559, 8, 7),
        ("H100-NVL-94GB", 95830, 8, 7),
        ("H200-141GB", 143771, 8, 7),
        ("B200-180GB", 183359, 8, 7),
    ],
)
def test_each_model_has_its_memory_and_slice_counts(
    key: str, total_mb: int, memory_slices: int, compute_slices: int
) -> None:
    table = model_by_key(key).profiles
    assert (table.total_memory_mb, table.memory_slices, table.compute_slices) == (
        total_mb, memory_slices, compute_slices,
    )


def test_the_a100_40gb_gi_profiles_carry_nvml_ids_enums_memory_sms_engines_and_placements() -> None:
    table = model_by_key("A100-40GB").profiles
    rows = [(gi.id, gi.enum_value, gi.slices, gi.memory_mb, gi.sms, gi.max_instances) for gi in table.gi_profiles]
    assert rows == [
        (19, 0, 1, 4864, 14, 7),
        (20, 7, 1, 4864, 14, 1),
        (15, 9, 1, 9856, 14, 4),
        (14, 1, 2, 9856, 28, 3),
        (9, 2, 3, 19968, 42, 2),
        (5, 3, 4, 19968, 56, 1),
        (0, 4, 7, 40192, 98, 1),
    ]
    plus_me = table.gi_profile(20)
    assert plus_me is not None
    assert plus_me.engines == Engines(copy=1, decoders=1, encoders=0, jpeg=1, ofa=1)
    three_g = table.gi_profile(9)
    assert three_g is not None
    assert three_g.placements == (Placement(0, 4), Placement(4, 4))
    assert [(ci.id, ci.slices, ci.max_instances, ci.is_default) for ci in three_g.ci_profiles] == [
        (0, 1, 3, False), (1, 2, 1, False), (2, 3, 1, True),
    ]


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.key)
def test_every_table_is_consistent_with_its_slices(model: GpuModel) -> None:
    table = model.profiles
    for gi in table.gi_profiles:
        assert gi.placements, gi.id
        assert all(p.end <= table.memory_slices for p in gi.placements), gi.id
        assert len({p.size for p in gi.placements}) == 1, gi.id
        assert gi.max_instances <= len(gi.placements), gi.id
        assert sum(ci.is_default for ci in gi.ci_profiles) == 1, gi.id
        assert gi.default_ci.slices == gi.slices, gi.id
        for ci in gi.ci_profiles:
            assert ci.slices <= gi.slices
            assert all(p.end <= gi.slices for p in ci.placements), (gi.id, ci.id)


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.key)
def test_mode_changes_need_a_reset_and_persist_across_reboot_on_ampere_only(model: GpuModel) -> None:
    ampere = model.key in ("A100-40GB", "A100-80GB", "A30-24GB", "PG506-96GB")
    assert (model.architecture is Architecture.AMPERE) == ampere
    assert model.mode_change_needs_reset == ampere
    assert model.mig_mode_persists_across_reboot == ampere


def test_the_b_and_rtx_pro_models_are_blackwell_and_the_other_non_ampere_models_are_hopper() -> None:
    kinds = {m.key: m.architecture for m in all_models() if m.architecture is not Architecture.AMPERE}
    for key in ("B200-180GB", "GB200-186GB", "B300-288GB", "GB300-288GB", "RTX-PRO-6000-96GB"):
        assert kinds.pop(key) is Architecture.BLACKWELL
    assert set(kinds.values()) == {Architecture.HOPPER}


def test_rows_not_captured_on_hardware_carry_their_confidence_tag() -> None:
    # Models with no capture at all are estimates in every row (tests/unit/catalog/test_default_config_models.py).
    uncaptured = ("B300-288GB", "GB300-288GB", "H20-96GB", "PG506-96GB")
    tagged = {
        (m.key, str(gi_profile_name(gi, m.profiles))): gi.confidence
        for m in all_models()
        for gi in m.profiles.gi_profiles
        if gi.confidence is not Confidence.OBSERVED and m.key not in uncaptured
    }
    assert tagged == {
        ("A100-80GB", "1g.20gb"): Confidence.DOCUMENTED,
        ("GH200-144GB", "3g.72gb"): Confidence.ESTIMATED,
        ("GH200-144GB", "4g.72gb"): Confidence.ESTIMATED,
        ("GH200-144GB", "7g.144gb"): Confidence.ESTIMATED,
        ("B200-180GB", "3g.90gb"): Confidence.ESTIMATED,
        ("B200-180GB", "4g.90gb"): Confidence.ESTIMATED,
        ("B200-180GB", "7g.180gb"): Confidence.ESTIMATED,
        ("GB200-186GB", "3g.93gb"): Confidence.ESTIMATED,
        ("GB200-186GB", "4g.93gb"): Confidence.ESTIMATED,
        ("GB200-186GB", "7g.186gb"): Confidence.ESTIMATED,
    }
