"""Remaining capacity and media-engine exclusivity (docs/nvml.md §5)."""

from __future__ import annotations

import dataclasses
from functools import partial

import pynvml
from hypothesis import given, settings
from hypothesis import strategies as st

from migagent.catalog import GpuModel, model_by_key
from migagent.sim import FakeNvml
from tests.unit.sim.helpers import capacity, create_gi, gi_placement, gi_profile, nvml_code, started

A100 = "A100-40GB"
A100_NAMES = ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")


def capacities(fake: FakeNvml) -> tuple[int, ...]:
    device = fake.nvmlDeviceGetHandleByIndex(0)
    return tuple(capacity(fake, device, A100, name) for name in A100_NAMES)


def test_capacity_follows_the_captured_a100_sequence() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert capacities(fake) == (7, 1, 4, 3, 2, 1, 1)
    create_gi(fake, device, gi_profile(A100, "4g.20gb").id, 0, 4)
    assert capacities(fake) == (3, 1, 2, 1, 1, 0, 0)
    create_gi(fake, device, gi_profile(A100, "2g.10gb").id, 4, 2)
    assert capacities(fake) == (1, 1, 1, 0, 0, 0, 0)
    create_gi(fake, device, gi_profile(A100, "1g.5gb").id, 6, 1)
    assert capacities(fake) == (0, 0, 0, 0, 0, 0, 0)


def test_capacity_is_not_supported_while_mig_is_disabled() -> None:
    fake = FakeNvml.from_spec(A100, profiles_queryable_when_disabled=True)
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert nvml_code(lambda: fake.nvmlDeviceGetGpuInstanceRemainingCapacity(device, 19)) == (
        pynvml.NVML_ERROR_NOT_SUPPORTED
    )


def test_capacity_counts_the_profiles_max_instances_not_only_free_slices() -> None:
    fake = started("H100-80GB-SXM")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    assert capacity(fake, device, "H100-80GB-SXM", "1g.10gb+me") == 1


def test_only_one_plus_me_instance_may_exist_per_gpu() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    plus_me = gi_profile(A100, "1g.5gb+me").id
    create_gi(fake, device, plus_me, 0, 1)
    assert capacity(fake, device, A100, "1g.5gb+me") == 0
    assert nvml_code(lambda: create_gi(fake, device, plus_me, 1, 1)) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    assert nvml_code(lambda: fake.nvmlDeviceCreateGpuInstance(device, plus_me)) == (
        pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    )
    create_gi(fake, device, gi_profile(A100, "1g.5gb").id, 1, 1)


def test_a_plus_me_instance_blocks_the_other_plus_me_profile_on_a30() -> None:
    fake = started("A30-24GB")
    device = fake.nvmlDeviceGetHandleByIndex(0)
    create_gi(fake, device, gi_profile("A30-24GB", "1g.6gb+me").id, 0, 1)
    assert capacity(fake, device, "A30-24GB", "2g.12gb+me") == 0
    assert capacity(fake, device, "A30-24GB", "2g.12gb") == 1


def test_plus_me_capacity_drops_to_zero_when_no_1g_slot_is_left() -> None:
    fake = started(A100)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    for start in range(6):
        create_gi(fake, device, gi_profile(A100, "1g.5gb").id, start, 1)
    assert capacity(fake, device, A100, "1g.5gb+me") == 1
    create_gi(fake, device, gi_profile(A100, "1g.5gb").id, 6, 1)
    assert capacity(fake, device, A100, "1g.5gb+me") == 0


def test_a_gi_profile_at_its_instance_limit_refuses_another_even_with_free_slices() -> None:
    base = model_by_key(A100)
    capped = tuple(dataclasses.replace(p, max_instances=2) if p.id == 19 else p for p in base.profiles.gi_profiles)
    table = dataclasses.replace(base.profiles, gi_profiles=capped)
    model = dataclasses.replace(base, key="TEST-CAPPED-GI", profiles=table)
    fake = FakeNvml.from_models([model], mig_enabled=True)
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    create_gi(fake, device, 19, 0, 1)
    fake.nvmlDeviceCreateGpuInstance(device, 19)
    assert fake.nvmlDeviceGetGpuInstanceRemainingCapacity(device, 19) == 0
    assert nvml_code(lambda: create_gi(fake, device, 19, 5, 1)) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    assert nvml_code(lambda: fake.nvmlDeviceCreateGpuInstance(device, 19)) == (
        pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    )


def _with_me_all_and_no_me() -> GpuModel:
    """An A100 table extended with `-me` and `+me.all` variants of its 1g profile (as on RTX PRO)."""
    base = model_by_key(A100)
    one_g = base.profiles.gi_profiles[0]
    no_me = dataclasses.replace(one_g, id=70, enum_value=pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME)
    me_all = dataclasses.replace(
        one_g, id=65, enum_value=pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, max_instances=1
    )
    profiles = dataclasses.replace(base.profiles, gi_profiles=(*base.profiles.gi_profiles, no_me, me_all))
    return dataclasses.replace(base, key="TEST-ME-ALL", profiles=profiles)


def test_a_plus_me_all_instance_prevents_every_profile_but_minus_me() -> None:
    fake = FakeNvml.from_models([_with_me_all_and_no_me()], mig_enabled=True)
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    create_gi(fake, device, 65, 0, 1)
    remaining = {
        p.id: fake.nvmlDeviceGetGpuInstanceRemainingCapacity(device, p.id)
        for p in _with_me_all_and_no_me().profiles.gi_profiles
    }
    assert remaining == {19: 0, 20: 0, 15: 0, 14: 0, 9: 0, 5: 0, 0: 0, 70: 6, 65: 0}
    assert nvml_code(lambda: create_gi(fake, device, 19, 1, 1)) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    create_gi(fake, device, 70, 1, 1)
    assert fake.nvmlDeviceGetGpuInstanceProfileInfo(device, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME).name == (
        "MIG 1g.5gb-me"
    )


def test_a_plus_me_all_instance_cannot_join_instances_other_than_minus_me_inferred() -> None:
    fake = FakeNvml.from_models([_with_me_all_and_no_me()], mig_enabled=True)
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(0)
    create_gi(fake, device, 70, 0, 1)
    assert fake.nvmlDeviceGetGpuInstanceRemainingCapacity(device, 65) == 1
    create_gi(fake, device, 19, 1, 1)
    assert fake.nvmlDeviceGetGpuInstanceRemainingCapacity(device, 65) == 0


PROFILE_IDS = {
    key: tuple(p.id for p in model_by_key(key).profiles.gi_profiles)
    for key in ("A100-40GB", "A30-24GB", "H100-80GB-SXM")
}


@settings(max_examples=60, deadline=None)
@given(
    key=st.sampled_from(sorted(PROFILE_IDS)),
    picks=st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=12),
)
def test_automatic_creation_succeeds_exactly_when_capacity_is_left_and_never_overlaps(
    key: str, picks: list[int]
) -> None:
    fake = started(key)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    model = model_by_key(key)
    for pick in picks:
        profile = model.profiles.gi_profiles[pick % len(model.profiles.gi_profiles)]
        left = fake.nvmlDeviceGetGpuInstanceRemainingCapacity(device, profile.id)
        if left == 0:
            assert nvml_code(partial(fake.nvmlDeviceCreateGpuInstance, device, profile.id)) == (
                pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
            )
            continue
        start, size = gi_placement(fake, fake.nvmlDeviceCreateGpuInstance(device, profile.id))
        assert (start, size) in {(p.start, p.size) for p in profile.placements}
        assert fake.nvmlDeviceGetGpuInstanceRemainingCapacity(device, profile.id) == left - 1
    slots = [s for gi in fake.state.gpus[0].gpu_instances for s in gi.placement.slots()]
    assert len(slots) == len(set(slots))
