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
from migagent.nvml.reset_checks import HostResetChecks
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


def test_identical_gpus_are_shown_once_after_a_summary_with_the_reset_section_as_the_readme_promises(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = _applied_node(tmp_path, "8xH100-80GB-SXM", "all-balanced")
    capsys.readouterr()
    assert main(["doctor", "--state", str(state)]) == 0
    text = capsys.readouterr().out
    report = yaml.safe_load(text)

    assert list(report)[:2] == ["summary", "driver_version"]
    assert report["summary"] == [
        "GPUs 0-7: NVIDIA H100 80GB HBM3 (H100-80GB-SXM), MIG on; as the catalog says",
        "GPU reset: not checked: a simulated node has no host to check (kernel modules, nvidia-persistenced,"
        " processes holding /dev/nvidia*)",
    ]
    assert report["reset_preconditions"] == [report["summary"][1].removeprefix("GPU reset: ")]
    (group,) = report["gpus"]
    assert group["indices"] == "0-7"
    assert [gpu["index"] for gpu in group["gpus"]] == list(range(8))
    assert len({gpu["uuid"] for gpu in group["gpus"]}) == 8
    assert group["catalog_row"] == "H100-80GB-SXM"
    assert len(text.splitlines()) < 260  # one GPU's profile table, not eight
    # Programs get one entry per GPU, after the same summary.
    assert main(["doctor", "--state", str(state), "-o", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["summary"] == report["summary"]
    assert [gpu["index"] for gpu in printed["gpus"]] == list(range(8))


def test_doctor_on_the_host_lists_what_would_block_a_reset(tmp_path: Path) -> None:
    fake = FakeNvml.from_spec("2xA100-40GB")
    host = tmp_path / "host"
    (host / "sys/module/nvidia_drm").mkdir(parents=True)
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        report = driver.inspect()
    blockers = [str(b) for b in HostResetChecks(host).blockers()]
    document = node_document(report, reset_blockers=blockers)
    assert document["summary"][-1] == "GPU reset: 1 thing(s) would block it, listed under reset_preconditions"
    assert document["reset_preconditions"][0].startswith("the nvidia_drm kernel module is loaded")
    assert node_document(report, reset_blockers=[])["summary"][-1] == (
        "GPU reset: nothing found that would block a GPU reset"
    )
