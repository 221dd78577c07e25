"""The default CI is NVML's answer for the GI that exists: the CI filling the GI with the most SMs, the
lower profile id on a tie (7_SLICE, not 7_SLICE_NVL, which nvml.h lists too)."""

from __future__ import annotations

from dataclasses import replace

from migagent.catalog import CiProfile, GpuModel, Placement, model_by_key
from migagent.nvml import GpuDriver
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner

SEVEN_G = 0  # A100's 7g GI profile id
SEVEN_SLICE_NVL = 8  # NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL


def _a100_whose_7g_also_offers_7_slice_nvl() -> GpuModel:
    model = model_by_key("A100-40GB")
    seven = model.profiles.gi_profile(SEVEN_G)
    assert seven is not None
    nvl = CiProfile(
        id=SEVEN_SLICE_NVL, slices=7, sms=seven.sms, max_instances=1, placements=(Placement(0, 7),), is_default=False
    )
    gis = tuple(
        replace(gi, ci_profiles=(*gi.ci_profiles, nvl)) if gi.id == SEVEN_G else gi
        for gi in model.profiles.gi_profiles
    )
    return replace(model, profiles=replace(model.profiles, gi_profiles=gis))


def test_a_7g_gi_offering_7_slice_nvl_keeps_7_slice_as_its_default() -> None:
    fake = FakeNvml.from_models([_a100_whose_7g_also_offers_7_slice_nvl()], mig_enabled=True)
    driver = GpuDriver(fake, reset_runner=SimResetRunner(fake))
    gi_id = driver.create_gpu_instance(0, profile_id=SEVEN_G, placement=Placement(0, 8))
    driver.create_compute_instance(0, gi_id=gi_id, profile_id=4, placement=Placement(0, 7))
    table = driver.observe().gpu(0).profiles
    assert table is not None
    seven = table.gi_profile(SEVEN_G)
    assert seven is not None
    assert SEVEN_SLICE_NVL in [ci.id for ci in seven.ci_profiles], "NVML's rows, not the catalog's"
    assert seven.default_ci.id == 4
