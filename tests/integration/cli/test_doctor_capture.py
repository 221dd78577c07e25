"""`migagent doctor --capture` reads every CI profile through a GI it creates and destroys; on the
simulator its rows equal the catalog's for every model. Plain `doctor` reports what decides how a
change goes, and degrades (reports unknown) where NVML answers NO_PERMISSION."""

from __future__ import annotations

import json
from pathlib import Path

import pynvml
import pytest

from migagent.catalog import Placement, model_by_key, model_keys
from migagent.cli import main
from migagent.cli.doctor import node_document, reported_table
from migagent.errors import PermanentError
from migagent.layout.catalog_diff import diff_profiles
from migagent.nvml import GpuDriver
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner


@pytest.mark.parametrize("key", model_keys())
def test_captured_rows_equal_the_catalogs_and_the_gpu_is_left_empty(key: str) -> None:
    fake = FakeNvml.from_spec(key, mig_enabled=True)
    driver = GpuDriver(fake, reset_runner=SimResetRunner(fake))
    (gpu,) = driver.capture().gpus
    row = model_by_key(key)
    assert gpu.ci_profiles_read == {gi.id for gi in row.profiles.gi_profiles}
    assert diff_profiles(reported_table(gpu, row), row, ci_profiles_read=gpu.ci_profiles_read) == []
    assert [ci.id for gi in gpu.gi_profiles for ci in gi.ci_profiles] == [
        ci.id for gi in sorted(row.profiles.gi_profiles, key=lambda g: (g.memory_mb, g.slices, g.enum_value))
        for ci in gi.ci_profiles
    ]
    assert fake.state.gpus[0].gpu_instances == []


def test_capture_refuses_a_gpu_with_mig_off_or_holding_a_gi_and_touches_nothing() -> None:
    off = FakeNvml.from_spec("A100-40GB")
    with pytest.raises(PermanentError, match="needs MIG mode enabled"):
        GpuDriver(off, reset_runner=SimResetRunner(off)).capture()
    busy = FakeNvml.from_spec("A100-40GB", mig_enabled=True)
    driver = GpuDriver(busy, reset_runner=SimResetRunner(busy))
    driver.create_gpu_instance(0, profile_id=19, placement=Placement(0, 1))
    busy.sim_mutations = []
    with pytest.raises(PermanentError, match="without GPU instances"):
        driver.capture()
    assert busy.sim_mutations == []


def test_doctor_reports_architecture_and_settings_and_degrades_on_no_permission(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeNvml.from_spec("A100-80GB")
    calls = ("nvmlDeviceGetPersistenceMode", "nvmlDeviceGetGpuInstanceProfileInfo", "nvmlSystemGetConfComputeState")
    for call in calls:
        fake.sim_inject_fault(call, pynvml.NVML_ERROR_NO_PERMISSION, times=None)
    state = tmp_path / "node.json"
    fake.save(state)
    # Faults are not saved with the node: run doctor in-process on the same fake instead.
    driver = GpuDriver(fake, reset_runner=SimResetRunner(fake))
    document = node_document(driver.inspect())
    (gpu,) = document["gpus"]
    assert gpu["architecture"] == "ampere"
    assert gpu["mode_change"].startswith("a MIG mode change is pending until the GPU is reset")
    assert gpu["persistence_mode"].startswith("unknown")
    assert gpu["virtualization_mode"] == "none (bare metal)"
    assert document["confidential_computing"].startswith("unknown")
    assert "NO_PERMISSION" in gpu["unreadable"][0]
    assert main(["doctor", "--state", str(state), "-o", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["gpus"][0]["architecture"] == "ampere"
    assert printed["confidential_computing"] == "off"
