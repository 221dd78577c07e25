"""CI profiles come from NVML for the GI that exists; a CI NVML refuses leaves no GI without CIs.

The simulated GPU is an H100 whose 1g.10gb GI offers only CI profile 7 (1_SLICE_REV1) where the
catalog's row says profile 0: a wrong catalog CI row, as the estimated rows may be."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from structlog.testing import capture_logs

from migagent.catalog import CiProfile, GpuModel, Placement, model_by_key
from migagent.layout.parse import parse_layout
from migagent.nvml.driver import GpuDriver
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner
from tests.integration.apply.support import SimNode

ONE_G = 19  # H100's 1g.10gb GI profile id
LAYOUT = """\
version: v1
mig-configs:
  h100-1g:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
"""


def _h100_whose_1g_gi_offers_only_ci_profile_7() -> GpuModel:
    model = model_by_key("H100-80GB-SXM")
    rev1 = CiProfile(id=7, slices=1, sms=16, max_instances=1, placements=(Placement(0, 1),), is_default=True)
    gis = tuple(replace(gi, ci_profiles=(rev1,)) if gi.id == ONE_G else gi for gi in model.profiles.gi_profiles)
    return replace(model, profiles=replace(model.profiles, gi_profiles=gis))


def _node(tmp_path: Path) -> SimNode:
    node = SimNode("H100-80GB-SXM", tmp_path / "journal")
    node.fake = FakeNvml.from_models([_h100_whose_1g_gi_offers_only_ci_profile_7()], mig_enabled=True)
    node.driver = GpuDriver(node.fake, reset_runner=SimResetRunner(node.fake))
    node.layout = parse_layout(LAYOUT, source="layouts.yaml")
    return node


def test_a_ci_profile_nvml_refuses_leaves_no_gi_without_cis_and_the_next_apply_uses_nvmls_profiles(
    tmp_path: Path,
) -> None:
    node = _node(tmp_path)
    with capture_logs() as logs:
        first = node.apply("h100-1g")
    assert not first.converged
    assert first.error is not None
    assert "nvmlGpuInstanceCreateComputeInstance" in first.error
    gis = node.observe().gpu(0).gpu_instances
    assert all(gi.compute_instances for gi in gis), f"a GI without CIs was left: {gis}"
    assert any(e["event"] == "gi_without_cis_destroyed" for e in logs)

    # The driver read NVML's CI profiles inside the GI it created: 1g.10gb now resolves to CI 7.
    assert node.driver.profile_table(0).gi_profile(ONE_G).default_ci.id == 7  # type: ignore[union-attr]
    with capture_logs():
        second = node.apply("h100-1g")
    assert second.converged, second.error
    observed = node.observe().gpu(0).gpu_instances
    assert [ci.profile_id for gi in observed for ci in gi.compute_instances] == [7] * 7


def test_ci_profiles_of_an_existing_gi_are_nvmls_not_the_catalogs(tmp_path: Path) -> None:
    node = _node(tmp_path)
    assert node.driver.profile_table(0).gi_profile(ONE_G).default_ci.id == 0  # type: ignore[union-attr]
    gi_id = node.driver.create_gpu_instance(0, profile_id=ONE_G, placement=Placement(0, 1))
    node.driver.create_compute_instance(0, gi_id=gi_id, profile_id=7, placement=Placement(0, 1))
    table = node.observe().gpu(0).profiles
    assert table is not None
    assert [ci.id for ci in table.gi_profile(ONE_G).ci_profiles] == [7]  # type: ignore[union-attr]
