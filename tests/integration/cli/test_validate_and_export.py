"""`migagent validate` and `migagent export` end to end, through `migagent.cli.main` on the simulator."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from structlog.testing import capture_logs

from migagent.cli import main
from migagent.nvml.driver import GpuDriver
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner

SHIPPED = Path(__file__).resolve().parents[3] / "configs" / "mig-layouts" / "mig-layouts.yaml"

# Written the way mig-parted's default file is: unfiltered `all-*` entries that only make sense on the
# models offering those profiles, and filtered entries where counts differ by model.
MIG_PARTED_STYLE = textwrap.dedent(
    """
    version: v1
    mig-configs:
      all-disabled:
        - devices: all
          mig-enabled: false
      all-1g.5gb:
        - devices: all
          mig-enabled: true
          mig-devices:
            "1g.5gb": 7
      all-1g.10gb:
        - device-filter: ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]
          devices: all
          mig-enabled: true
          mig-devices:
            "1g.10gb": 4
        - device-filter: ["0x233010DE", "0x233110DE", "0x20B210DE", "0x20B510DE"]
          devices: all
          mig-enabled: true
          mig-devices:
            "1g.10gb": 7
      all-1g.16gb.gfx:
        - devices: all
          mig-enabled: true
          mig-devices:
            "1g.16gb+gfx": 2
      all-balanced:
        - device-filter: ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]
          devices: all
          mig-enabled: true
          mig-devices:
            "1g.5gb": 2
            "2g.10gb": 1
            "3g.20gb": 1
        # RTX PRO 4500 Blackwell-like made-up id: hardware the catalog does not describe
        - device-filter: "0x2C3110DE"
          devices: all
          mig-enabled: true
          mig-devices:
            "1g.23gb": 2
            "2g.47gb": 1
            "3g.93gb": 1
      custom-config:
        - devices: [0,1,2,3]
          mig-enabled: false
        - devices: [4]
          mig-enabled: true
          mig-devices:
            "1g.5gb": 7
        - devices: [5]
          mig-enabled: true
          mig-devices:
            "2g.10gb": 3
        - devices: [6]
          mig-enabled: true
          mig-devices:
            "3g.20gb": 2
        - devices: [7]
          mig-enabled: true
          mig-devices:
            "1g.5gb": 2
            "2g.10gb": 1
            "3g.20gb": 1
    """
)


def _write(tmp_path: Path, text: str, name: str = "layouts.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_validate_accepts_every_shipped_layout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-f", str(SHIPPED)]) == 0
    out = capsys.readouterr().out
    assert "INVALID" not in out
    assert "all-balanced: valid on A100-40GB, A100-80GB, A30-24GB" in out
    summary = out.splitlines()[-1]
    assert summary.endswith(" config(s) valid"), f"every shipped config is checked somewhere: {summary}"


def test_validate_accepts_a_file_written_for_mig_parted_with_unfiltered_model_specific_entries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, MIG_PARTED_STYLE)
    # 1g.16gb+gfx is offered by no catalog model: that config is refused, the others are reported.
    assert main(["validate", "-f", str(path), "-v"]) == 1
    captured = capsys.readouterr()
    out = captured.out
    assert "all-1g.5gb: valid on A100-40GB\n  checked entries [0] on A100-40GB\n  skipped 15 models: A100-80GB," in out
    assert "H20-96GB, PG506-96GB; why: lacks 1g.5gb\n" in out
    assert "all-1g.16gb.gfx: INVALID: 1 problem(s), listed below\n" in out
    assert "mig-configs.all-1g.16gb.gfx[0]: profile '1g.16gb+gfx' is offered by no catalog GPU model" in captured.err
    assert "all-balanced: partly checked; valid on A100-40GB; not checked: [1] device-filter" in out
    assert "custom-config: valid on A100-40GB, A100-80GB, A30-24GB, H100-80GB-SXM, H100-80GB-PCIe,\n    H100-NVL" in out
    assert "  checked entries [0-4] on A100-40GB\n" in out
    assert all(len(line) <= 100 for line in out.splitlines())


def test_validate_warns_about_entries_for_hardware_the_catalog_does_not_describe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "-f", str(_write(tmp_path, MIG_PARTED_STYLE)), "-c", "all-balanced"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (
        "all-balanced: partly checked; valid on A100-40GB; not checked: [1] device-filter 0x2C3110DE matches no"
        " catalog model"
    )
    assert out.splitlines()[-1].endswith(": 0 config(s) valid, 1 partly checked")


def test_validate_with_a_named_model_refuses_a_profile_that_model_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, MIG_PARTED_STYLE)
    assert main(["validate", "-f", str(path), "-c", "all-1g.5gb", "--gpu-model", "h100-80gb-sxm"]) == 1
    err = capsys.readouterr().err
    assert "1g.5gb" in err
    assert "H100-80GB-SXM" in err
    assert "1g.10gb" in err  # lists what that GPU does offer


def test_validate_refuses_a_layout_that_does_not_fit_and_names_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = """
version: v1
mig-configs:
  too-big:
    - device-filter: "0x233010DE"
      devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2, "2g.20gb": 1}
"""
    assert main(["validate", "-f", str(_write(tmp_path, text))]) == 1
    err = capsys.readouterr().err
    assert "too-big" in err
    assert "3g.40gb" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("broken", "expected"),
    [
        ("version: v2\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n", "version"),
        ("version: v1\nmig-configs: {a: [{devices: 7, mig-enabled: false}]}\n", "devices"),
        ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, mig-devices: {1g.5gb: -1}}]}\n", "1g.5gb"),
        ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, colour: red}]}\n", "colour"),
        ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, mig-devices: {1x.5gb: 1}}]}\n", "1x.5gb"),
        ("version: v1\nmig-configs: {a: [{devices: all\n", "a"),
    ],
)
def test_validate_refuses_broken_files_with_a_message_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: str, expected: str
) -> None:
    assert main(["validate", "-f", str(_write(tmp_path, broken))]) == 1
    err = capsys.readouterr().err
    assert expected in err
    assert "layouts.yaml" in err
    assert "Traceback" not in err


def test_validate_names_the_missing_config_and_lists_the_available_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "-f", str(_write(tmp_path, MIG_PARTED_STYLE)), "-c", "nope"]) == 1
    err = capsys.readouterr().err
    assert "nope" in err
    assert "custom-config" in err


def test_export_of_a_fresh_simulated_node_is_v1_yaml_that_validate_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "--simulate", "2xA100-80GB"]) == 0
    exported = capsys.readouterr().out
    document = yaml.safe_load(exported)
    assert document["version"] == "v1"
    assert document["mig-configs"]["current"] == [{"devices": "all", "mig-enabled": False}]
    assert main(["validate", "-f", str(_write(tmp_path, exported))]) == 0


def test_export_in_json_with_a_label(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--simulate", "1xH100-80GB-SXM", "-o", "json", "-l", "snapshot"]) == 0
    assert '"snapshot"' in capsys.readouterr().out


@pytest.mark.parametrize("output", ["yaml", "json"])
def test_export_warns_of_each_gpu_instance_without_a_compute_instance_which_its_format_cannot_show(
    output: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "node.json"
    shipped = str(Path(__file__).resolve().parents[3] / "configs/mig-layouts/mig-layouts.yaml")
    with capture_logs():
        assert main(["apply", "--simulate", "2xH100-80GB-SXM", "--state", str(state), "-f", shipped,
                     "-c", "all-balanced"]) == 0
    fake = FakeNvml.load(state)
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        three_g = next(gi for gi in driver.observe().gpu(1).gpu_instances if gi.placement.size == 4)
        driver.destroy_compute_instance(1, gi_id=three_g.id, ci_id=three_g.compute_instances[0].id)
    fake.save(state)
    capsys.readouterr()

    assert main(["export", "--state", str(state), "-o", output]) == 0
    captured = capsys.readouterr()
    (warning,) = captured.err.splitlines()
    assert warning == (
        "migagent export: warning: 1 GPU instance(s) without a compute instance, which mig-parted's format (compute"
        f" instances counted by profile) cannot show: GPU 1: GPU instance {three_g.id} (3g.40gb at slot 4);"
        " the next apply destroys them"
    )
    document = yaml.safe_load(captured.out)  # JSON is YAML too
    gpu1 = next(entry for entry in document["mig-configs"]["current"] if entry["devices"] == [1])
    assert "3g.40gb" not in gpu1["mig-devices"]  # the format has no way to say it: hence the warning
