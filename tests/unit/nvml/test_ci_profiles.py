"""The inferred CI-profile rule used for GPUs the catalog does not know (docs/nvml.md §8, inferred)."""

from __future__ import annotations

import pytest

from migagent.catalog import GiProfile, GpuModel, Placement, all_models
from migagent.nvml.ci_profiles import PLAIN_GI_ENUMS, inferred_ci_profiles

CASES = [(model, gi) for model in all_models() for gi in model.profiles.gi_profiles]


def _plain_sms(model: GpuModel) -> dict[int, int]:
    return {gi.slices: gi.sms for gi in model.profiles.gi_profiles if gi.enum_value in PLAIN_GI_ENUMS}


@pytest.mark.parametrize(("model", "gi"), CASES, ids=[f"{model.key}-gi{gi.id}" for model, gi in CASES])
def test_inferred_ci_profiles_reproduce_the_catalog_for_every_model_inferred_rule_uncertain(
    model: GpuModel, gi: GiProfile
) -> None:
    inferred = inferred_ci_profiles(gi_slices=gi.slices, gi_sms=gi.sms, plain_sms_by_slices=_plain_sms(model))
    assert inferred == gi.ci_profiles


def test_a_7_slice_gi_offers_3c_at_compute_slices_0_and_4_inferred_rule_uncertain() -> None:
    profiles = inferred_ci_profiles(gi_slices=7, gi_sms=98, plain_sms_by_slices={1: 14, 2: 28, 3: 42, 4: 56})
    three_c = next(ci for ci in profiles if ci.slices == 3)
    assert three_c.placements == (Placement(0, 3), Placement(4, 3))
    assert [ci.id for ci in profiles if ci.is_default] == [4]


def test_a_4_slice_gi_offers_no_3c_inferred_rule_uncertain() -> None:
    profiles = inferred_ci_profiles(gi_slices=4, gi_sms=56, plain_sms_by_slices={1: 14, 2: 28, 3: 42, 4: 56})
    assert sorted(ci.slices for ci in profiles) == [1, 2, 4]


def test_a_double_memory_1g_gi_with_extra_sms_defaults_to_the_rev1_ci_inferred_rule_uncertain() -> None:
    profiles = inferred_ci_profiles(gi_slices=1, gi_sms=26, plain_sms_by_slices={1: 16})
    assert [(ci.id, ci.sms, ci.is_default) for ci in profiles] == [(0, 16, False), (7, 26, True)]


def test_without_plain_profiles_ci_sms_are_a_proportional_share_of_the_gi_inferred_rule_uncertain() -> None:
    profiles = inferred_ci_profiles(gi_slices=2, gi_sms=40, plain_sms_by_slices={})
    assert [(ci.slices, ci.sms) for ci in profiles] == [(1, 20), (2, 40)]
