"""`migagent doctor` end to end on the simulator: read-only, catalog-format profiles, a diff per GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pynvml
import pytest
import yaml

from migagent.cli import main
from migagent.cli.doctor import node_document
from migagent.nvml import GpuDriver
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner

LAYOUTS = Path(__file__).resolve().parents[3] / "configs" / "mig-layouts" / "mig-layouts.yaml"


def _applied_node(tmp_path: Path, spec: str, config: str) -> Path:
    state = tmp_path / "node.json"
    assert main(["apply", "--simulate", spec, "--state", str(state), "-f", str(LAYOUTS), "-c", config]) == 0
    return state


def test_doctor_leaves_the_saved_simulated_node_byte_for_byte_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = _applied_node(tmp_path, "1xA100-80GB,1xRTX-PRO-6000-96GB", "all-balanced")
    before = state.read_bytes()
    capsys.readouterr()

    assert main(["doctor", "--state", str(state)]) == 0

    assert state.read_bytes() == before


def test_doctor_prints_versions_modes_profiles_in_catalog_format_and_an_empty_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = _applied_node(tmp_path, "1xA100-80GB,1xRTX-PRO-6000-96GB", "all-balanced")
    capsys.readouterr()

    assert main(["doctor", "--state", str(state)]) == 0
    report = yaml.safe_load(capsys.readouterr().out)

    assert report["driver_version"] == "580.65.06"
    assert report["nvml_version"] == "13.580.65.06"
    a100, rtx = report["gpus"]
    assert (a100["catalog_row"], rtx["catalog_row"]) == ("A100-80GB", "RTX-PRO-6000-96GB")
    assert a100["mig"] == {"capable": True, "current": True, "pending": True}
    assert a100["pci_device_id"] == "0x20B210DE"
    three_g = next(gi for gi in a100["gi_profiles"] if gi["id"] == 9)
    assert three_g["name"] == "MIG 3g.40gb"
    assert three_g["placements"] == [[0, 4], [4, 4]]
    assert [ci["id"] for ci in three_g["ci_profiles"]] == [0, 1, 2]  # a live 3g GI: its CI profiles were read
    plus_gfx = next(gi for gi in rtx["gi_profiles"] if gi["id"] == 47)
    assert plus_gfx["name"] == "MIG 1g.24gb+gfx"
    assert plus_gfx["ci_profiles"].startswith("not read")  # no live +gfx GI, and doctor creates none
    assert a100["diff_against_catalog"] == []
    assert rtx["diff_against_catalog"] == []


def test_doctor_json_output_and_the_mig_disabled_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--simulate", "1xH100-80GB-SXM", "--output", "json"]) == 0
    (gpu,) = json.loads(capsys.readouterr().out)["gpus"]
    assert gpu["mig"] == {"capable": True, "current": False, "pending": False}
    assert gpu["gi_profiles"] == []
    assert "enable MIG mode and run it again" in gpu["diff_against_catalog"][0]


def test_a_gpu_that_is_not_mig_capable_is_said_to_be_so_not_missing_from_the_catalog() -> None:
    fake = FakeNvml.from_spec("1xA100-40GB")
    fake.sim_inject_fault("nvmlDeviceGetMigMode", pynvml.NVML_ERROR_NOT_SUPPORTED, times=None)
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        (gpu,) = node_document(driver.inspect())["gpus"]
    assert gpu["mig"] == {"capable": False, "current": False, "pending": False}
    assert gpu["diff_against_catalog"] == ["not MIG capable: nvmlDeviceGetMigMode answers NOT_SUPPORTED"]
