"""profile_table(): read through NVML, equal to the catalog; catalog fallback; inferred CI rows; caching."""

from __future__ import annotations

import dataclasses

import pynvml
import pytest

from migagent.catalog import Confidence, GpuModel, ProfileTable, all_models, model_by_key
from migagent.errors import NotSupportedError, TransientError
from migagent.nvml import ModeActivation
from migagent.sim import FakeNvml
from tests.unit.nvml.conftest import DriverFactory

MODELS = all_models()


def _without_confidence(table: ProfileTable) -> ProfileTable:
    """Confidence is catalog metadata (how sure we are of a row); NVML-read rows carry the default."""
    return dataclasses.replace(
        table,
        gi_profiles=tuple(dataclasses.replace(gi, confidence=Confidence.OBSERVED) for gi in table.gi_profiles),
    )


@pytest.mark.parametrize("model", MODELS, ids=[m.key for m in MODELS])
def test_the_table_read_through_nvml_equals_the_catalogs_for_every_model(
    open_driver: DriverFactory, model: GpuModel
) -> None:
    driver = open_driver(FakeNvml.from_spec(model.key, mig_enabled=True))

    table = driver.profile_table(0)

    assert [(gi.id, gi.enum_value) for gi in table.gi_profiles] == [
        (gi.id, gi.enum_value) for gi in model.profiles.gi_profiles
    ]
    assert {gi.id: gi.placements for gi in table.gi_profiles} == {
        gi.id: gi.placements for gi in model.profiles.gi_profiles
    }
    assert {gi.id: gi.memory_mb for gi in table.gi_profiles} == {
        gi.id: gi.memory_mb for gi in model.profiles.gi_profiles
    }
    assert _without_confidence(table) == _without_confidence(model.profiles)


@pytest.mark.parametrize("key", ["A100-40GB", "A30-24GB", "H100-80GB-SXM", "B200-180GB"])
def test_profiles_are_read_from_nvml_while_mig_is_disabled_where_the_driver_answers(
    open_driver: DriverFactory, key: str
) -> None:
    fake = FakeNvml.from_spec(key, profiles_queryable_when_disabled=True)
    table = open_driver(fake).profile_table(0)
    assert _without_confidence(table) == _without_confidence(model_by_key(key).profiles)
    assert all(gi.confidence is Confidence.OBSERVED for gi in table.gi_profiles)


def test_the_catalog_table_stands_in_while_mig_is_disabled_and_profiles_are_not_queryable(
    open_driver: DriverFactory,
) -> None:
    fake = FakeNvml.from_spec("GH200-144GB")
    driver = open_driver(fake)
    device = fake.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        fake.nvmlDeviceGetGpuInstanceProfileInfo(device, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE)

    assert driver.profile_table(0) == model_by_key("GH200-144GB").profiles
    assert driver.observe().gpu(0).profiles == model_by_key("GH200-144GB").profiles


def _unknown_model(base_key: str, *, pci_device_id: int) -> GpuModel:
    base = model_by_key(base_key)
    return dataclasses.replace(
        base,
        key=f"unknown-{pci_device_id:08x}",
        pci_device_ids=(pci_device_id,),
        names_by_pci_id=((pci_device_id, "NVIDIA Future GPU"),),
    )


def test_an_unknown_gpu_gets_its_gi_rows_from_nvml_and_inferred_ci_rows_inferred_rule_uncertain(
    open_driver: DriverFactory,
) -> None:
    unknown = _unknown_model("H100-NVL-94GB", pci_device_id=0x2F0010DE)
    driver = open_driver(FakeNvml.from_models([unknown], mig_enabled=True))

    table = driver.profile_table(0)

    assert _without_confidence(table) == _without_confidence(model_by_key("H100-NVL-94GB").profiles)
    assert driver.observe().gpu(0).mode_change_needs_reset is False


def test_an_unknown_gpu_without_profile_queries_has_no_table_and_says_how_to_get_one(
    open_driver: DriverFactory,
) -> None:
    unknown = _unknown_model("H100-80GB-SXM", pci_device_id=0x2F0110DE)
    driver = open_driver(FakeNvml.from_models([unknown]))

    assert driver.observe().gpu(0).profiles is None
    with pytest.raises(NotSupportedError, match=r"0x2f0110de.*enable MIG mode first"):
        driver.profile_table(0)


def test_an_unknown_ga100_family_id_is_assumed_to_need_a_reset_for_mode_changes(
    open_driver: DriverFactory,
) -> None:
    unknown = _unknown_model("A100-80GB", pci_device_id=0x20FE10DE)
    gpu = open_driver(FakeNvml.from_models([unknown])).observe().gpu(0)
    assert gpu.mode_change_needs_reset is True


def test_total_memory_comes_from_nvml_and_falls_back_to_the_catalog_when_unreadable(
    open_driver: DriverFactory,
) -> None:
    fake = FakeNvml.from_spec("2xA100-80GB", mig_enabled=True)
    driver = open_driver(fake)
    assert driver.profile_table(0).total_memory_mb == 81920

    fake.sim_inject_fault("nvmlDeviceGetMemoryInfo", pynvml.NVML_ERROR_NO_PERMISSION)
    assert driver.profile_table(1).total_memory_mb == 81920


def test_profile_tables_are_cached_per_gpu_and_mig_mode(open_driver: DriverFactory) -> None:
    fake = FakeNvml.from_spec("H100-80GB-SXM", profiles_queryable_when_disabled=True)
    driver = open_driver(fake)
    disabled_table = driver.profile_table(0)

    fake.sim_inject_fault("nvmlDeviceGetGpuInstanceProfileInfo", pynvml.NVML_ERROR_UNKNOWN, times=None)
    assert driver.profile_table(0) is disabled_table
    assert driver.observe().gpu(0).profiles is disabled_table

    assert driver.set_mig_mode(0, enabled=True) is ModeActivation.ACTIVE
    with pytest.raises(TransientError, match="nvmlDeviceGetGpuInstanceProfileInfo"):
        driver.observe()
    fake.sim_clear_faults()
    assert driver.observe().gpu(0).profiles == disabled_table
