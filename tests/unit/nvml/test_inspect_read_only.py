"""GpuDriver.inspect (`doctor`): reads what NVML reports and never calls a mutating NVML function."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pynvml
import pytest

from migagent.catalog import Engines, GpuModel, Placement, driver_variants, model_by_key
from migagent.errors import MigAgentError
from migagent.layout.catalog_diff import diff_profiles
from migagent.nvml import GpuDriver
from migagent.nvml.inspect import NodeReport
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner
from tests.unit.nvml.conftest import DriverFactory

# Every NVML function that changes a GPU has one of these verbs in its name (nvml.h naming).
MUTATING = re.compile(r"^nvml\w*(Set|Create|Destroy|Reset|Clear|Register|Unregister)\w*$")


class ReadOnlyNvml:
    """Passes pynvml calls to a FakeNvml, records their names, and fails the test on any mutating one
    before it reaches the simulated GPU."""

    def __init__(self, fake: FakeNvml) -> None:
        self._fake = fake
        self.called: list[str] = []

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._fake, name)
        if not name.startswith("nvml") or not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            if MUTATING.match(name):
                raise AssertionError(f"read-only inspection called mutating NVML function {name}")
            self.called.append(name)
            return target(*args, **kwargs)

        return call


def populated(spec: str) -> FakeNvml:
    """A node with MIG on and GIs on GPU 0 (one 3g with two CIs, one 1g), set up through the driver."""
    fake = FakeNvml.from_spec(spec, mig_enabled=True)
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        three_g = driver.create_gpu_instance(0, profile_id=9, placement=Placement(4, 4))
        driver.create_compute_instance(0, gi_id=three_g, profile_id=1, placement=Placement(0, 2))
        driver.create_compute_instance(0, gi_id=three_g, profile_id=0, placement=Placement(2, 1))
        one_g = driver.create_gpu_instance(0, profile_id=19, placement=Placement(0, 1))
        driver.create_compute_instance(0, gi_id=one_g, profile_id=0)
    return fake


def inspect(lib: Any) -> NodeReport:
    with GpuDriver(lib, reset_runner=SimResetRunner(lib._fake if isinstance(lib, ReadOnlyNvml) else lib)) as driver:
        return driver.inspect()


def test_the_guard_itself_refuses_a_mutating_call_so_the_read_only_test_can_fail() -> None:
    guard = ReadOnlyNvml(FakeNvml.from_spec("A100-80GB"))
    guard.nvmlInit()
    with pytest.raises(AssertionError, match="nvmlDeviceSetMigMode"):
        guard.nvmlDeviceSetMigMode(guard.nvmlDeviceGetHandleByIndex(0), 1)


@pytest.mark.parametrize("spec", ["2xA100-80GB", "H100-80GB-SXM", "B200-180GB"])
def test_inspection_calls_only_query_functions_and_leaves_the_node_exactly_as_it_was(spec: str) -> None:
    fake = populated(spec)
    mutations_before, state_before = list(fake.sim_mutations), fake.state.to_dict()
    guard = ReadOnlyNvml(fake)

    report = inspect(guard)

    assert not [name for name in guard.called if MUTATING.match(name)]
    assert "nvmlGpuInstanceGetComputeInstanceProfileInfo" in guard.called  # it did read CI profiles
    assert fake.sim_mutations == mutations_before
    assert fake.state.to_dict() == state_before
    assert len(report.gpus) == len(fake.state.gpus)


def test_the_report_holds_versions_modes_and_the_catalogs_gi_rows_with_cis_read_through_live_gis() -> None:
    fake = populated("2xA100-80GB")
    fake.sim_driver_version, fake.sim_nvml_version = "575.57.08", "12.575.57.08"
    report = inspect(fake)
    model = model_by_key("A100-80GB")

    assert (report.driver_version, report.nvml_version) == ("575.57.08", "12.575.57.08")
    gpu = report.gpus[0]
    assert (gpu.mig_capable, gpu.mig_current, gpu.mig_pending) == (True, True, True)
    assert gpu.ci_profiles_read == {9, 19}
    catalog = {gi.id: gi for gi in model.profiles.gi_profiles}
    for gi in gpu.gi_profiles:
        expected = catalog[gi.id]
        # Confidence is catalog provenance; what NVML reports carries the default.
        assert dataclasses.replace(gi, ci_profiles=expected.ci_profiles, confidence=expected.confidence) == expected
        if gi.id in gpu.ci_profiles_read:
            assert gi.ci_profiles == expected.ci_profiles
        else:
            assert gi.ci_profiles == ()
    assert diff_profiles(model.profiles, model, ci_profiles_read=gpu.ci_profiles_read) == []


def test_a_gpu_with_mig_disabled_reports_no_gi_profiles_where_the_driver_refuses_the_query() -> None:
    gpu = inspect(FakeNvml.from_spec("A100-40GB")).gpus[0]
    assert (gpu.mig_capable, gpu.mig_current, gpu.mig_pending) == (True, False, False)
    assert gpu.gi_profiles == ()


def _variant_node(model: GpuModel) -> FakeNvml:
    return FakeNvml.from_models([model], mig_enabled=True)


def test_the_diff_names_field_values_and_marks_a_value_the_catalog_says_is_disputed(
    open_driver: DriverFactory,
) -> None:
    # An A30 whose driver reports 0 NVDECs for 1g.6gb, as the MIG User Guide table says.
    a30 = model_by_key("A30-24GB")
    one_g = a30.profiles.gi_profile(14)
    assert one_g is not None
    guide = dataclasses.replace(one_g, engines=dataclasses.replace(one_g.engines, decoders=0))
    table = dataclasses.replace(
        a30.profiles, gi_profiles=tuple(guide if gi.id == 14 else gi for gi in a30.profiles.gi_profiles)
    )
    gpu = open_driver(_variant_node(dataclasses.replace(a30, profiles=table))).inspect().gpus[0]
    reported = dataclasses.replace(table, total_memory_mb=gpu.total_memory_mb or 0, gi_profiles=gpu.gi_profiles)

    assert diff_profiles(reported, a30, ci_profiles_read=gpu.ci_profiles_read) == [
        "GI profile 14 (1g.6gb) dec: NVML 0, catalog 1 (catalog marks this value disputed)",
    ]


def test_the_diff_lists_profiles_missing_on_either_side_and_placements_that_differ() -> None:
    h100 = model_by_key("H100-80GB-SXM")
    profiles = h100.profiles
    seven_g = profiles.gi_profile(0)
    assert seven_g is not None
    moved = dataclasses.replace(seven_g, placements=(Placement(0, 7),))
    extra = dataclasses.replace(seven_g, id=99, enum_value=17, engines=Engines(copy=8))
    reported = dataclasses.replace(
        profiles,
        gi_profiles=(*[gi for gi in profiles.gi_profiles if gi.id not in (0, 20)], moved, extra),
    )

    lines = diff_profiles(reported, h100, ci_profiles_read=())

    assert "GI profile 0 (7g.80gb) placements: NVML [0:7], catalog [0:8]" in lines
    assert "GI profile 99 (7g.80gb+gfx): reported by NVML, missing from catalog row H100-80GB-SXM" in lines
    assert "GI profile 20 (1g.10gb+me): in catalog row H100-80GB-SXM, not reported by NVML" in lines
    assert len(lines) == 3


def test_cis_are_compared_only_where_they_were_read_through_a_live_gi() -> None:
    a100 = model_by_key("A100-40GB")
    three_g = a100.profiles.gi_profile(9)
    assert three_g is not None
    fewer = dataclasses.replace(three_g, ci_profiles=three_g.ci_profiles[1:])
    reported = dataclasses.replace(
        a100.profiles, gi_profiles=tuple(fewer if gi.id == 9 else gi for gi in a100.profiles.gi_profiles)
    )
    assert diff_profiles(reported, a100, ci_profiles_read=()) == []
    assert diff_profiles(reported, a100, ci_profiles_read={9}) == [
        "GI profile 9 (3g.20gb) CI profile 0: in the catalog, not reported by NVML",
    ]


def test_an_early_gb200_driver_matches_its_driver_variant_row_exactly(open_driver: DriverFactory) -> None:
    (variant,) = driver_variants()
    gpu = open_driver(_variant_node(variant)).inspect().gpus[0]
    reported = dataclasses.replace(variant.profiles, total_memory_mb=gpu.total_memory_mb or 0,
                                   gi_profiles=gpu.gi_profiles)
    assert diff_profiles(reported, variant, ci_profiles_read=gpu.ci_profiles_read) == []
    primary = model_by_key(variant.variant_of)
    assert any("name: NVML derives 1g.24gb, catalog 1g.23gb" in line
               for line in diff_profiles(reported, primary, ci_profiles_read=gpu.ci_profiles_read))




def test_a_ci_profile_the_gi_does_not_offer_is_skipped_and_enumeration_goes_on_to_the_next() -> None:
    fake = FakeNvml.from_spec("A100-80GB", mig_enabled=True)
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        driver.create_gpu_instance(0, profile_id=9, placement=Placement(0, 4))  # the only GI: a 3g
    # The first CI query (enum 0, 1c) answers NOT_SUPPORTED: an absent profile, not the end of the enum.
    fake.sim_inject_fault("nvmlGpuInstanceGetComputeInstanceProfileInfo", pynvml.NVML_ERROR_NOT_SUPPORTED, times=1)
    gpu = inspect(fake).gpus[0]
    three_g = next(gi for gi in gpu.gi_profiles if gi.id == 9)
    assert gpu.ci_profiles_read == {9}
    assert [(ci.id, ci.is_default) for ci in three_g.ci_profiles] == [(1, False), (2, True)]


def test_an_nvml_failure_while_reading_ci_profiles_is_a_clear_error_naming_the_call_and_gpu() -> None:
    fake = populated("A100-80GB")
    fake.sim_inject_fault("nvmlGpuInstanceGetComputeInstanceProfileInfo", pynvml.NVML_ERROR_UNKNOWN, times=1)
    with pytest.raises(MigAgentError, match=r"GPU 0 .*nvmlGpuInstanceGetComputeInstanceProfileInfo\(enum 0\)"):
        inspect(fake)
