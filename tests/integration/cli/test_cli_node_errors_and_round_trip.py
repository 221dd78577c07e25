"""CLI edges: subsystem-qualified filters in validate, user errors as one line, export after apply round-trips."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from migagent.cli import main
from migagent_sim.doubles.layouts import ALL_1G

SPEC = "2xA100-40GB,2xA30-24GB,1xH100-80GB-SXM"

# Compute profiles smaller than their GI (C<G), +me profiles, mixed models and a disabled GPU.
MIXED = textwrap.dedent(
    """
    version: v1
    mig-configs:
      mixed:
        - device-filter: "0x20B010DE"
          devices: [0]
          mig-enabled: true
          mig-devices: {"2c.4g.20gb": 1, "1c.4g.20gb": 2, "1g.5gb+me": 1, "1g.5gb": 2}
        - device-filter: "0x20B010DE"
          devices: [1]
          mig-enabled: false
        - device-filter: "0x20B710DE"
          devices: all
          mig-enabled: true
          mig-devices: {"1c.2g.12gb+me": 2, "1g.6gb": 2}
        - device-filter: "0x233010DE"
          devices: all
          mig-enabled: true
          mig-devices: {"1c.7g.80gb": 1, "2c.7g.80gb": 1, "3c.7g.80gb": 1}
    """
)


def _write(tmp_path: Path, text: str, name: str = "layouts.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _subsystem_entry(counts: str) -> str:
    return (
        "version: v1\nmig-configs:\n  one-board:\n"
        '    - device-filter: ["0x20B010DE:0x147E10DE"]\n'
        f"      devices: all\n      mig-enabled: true\n      mig-devices: {counts}\n"
    )


def test_validate_checks_an_entry_whose_filter_names_a_subsystem_on_that_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "-f", str(_write(tmp_path, _subsystem_entry('{"1g.10gb": 4}')))]) == 0
    assert "one-board: valid on A100-40GB\n" in capsys.readouterr().out
    assert main(["validate", "-f", str(_write(tmp_path, _subsystem_entry('{"1g.10gb": 7}')))]) == 1
    err = capsys.readouterr().err
    assert "mig-configs.one-board[0] on A100-40GB" in err
    assert "at most 4" in err


def test_an_unknown_gpu_model_for_validate_is_one_clear_line_not_an_internal_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, _subsystem_entry('{"1g.10gb": 4}'))
    assert main(["validate", "-f", str(path), "--gpu-model", "T4"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("migagent validate: --gpu-model: unknown GPU model 'T4'; valid models: A100-40GB")
    assert "internal error" not in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("command", [["export"], ["assert", "-f", "LAYOUT", "-c", "mixed"]])
@pytest.mark.parametrize(
    ("node", "says"),
    [
        (["--simulate", "3xT4"], "--simulate: unknown GPU model 'T4'"),
        (["--simulate", "0xA100-40GB"], "--simulate: entry '0xA100-40GB'"),
        (["--state", "BAD_JSON"], "is not JSON"),
        (["--state", "DIRECTORY"], "cannot load the simulated node"),
    ],
)
def test_a_bad_simulated_node_is_one_clear_line_not_an_internal_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], node: list[str], says: str
) -> None:
    substitutes = {
        "LAYOUT": str(_write(tmp_path, MIXED)),
        "BAD_JSON": str(_write(tmp_path, "not json", name="state.json")),
        "DIRECTORY": str(tmp_path),
    }
    argv = [substitutes.get(arg, arg) for arg in [*command, *node]]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert says in err
    assert "internal error" not in err
    assert len(err.splitlines()) == 1


def test_a_state_file_that_cannot_be_saved_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = _write(tmp_path, "a file, not a folder", name="blocker")
    assert main(["export", "--simulate", "1xA30-24GB", "--state", str(blocker / "state.json")]) == 1
    err = capsys.readouterr().err
    assert f"cannot write the simulated node {blocker / 'state.json'}: Not a directory (ENOTDIR)" in err
    assert "internal error" not in err
    assert len(err.splitlines()) == 1


def test_export_after_apply_round_trips_compute_profiles_media_mixed_models_and_disabled_gpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout, first, second = _write(tmp_path, MIXED), tmp_path / "first.json", tmp_path / "second.json"
    assert main(["apply", "-f", str(layout), "-c", "mixed", "--simulate", SPEC, "--state", str(first)]) == 0
    capsys.readouterr()
    assert main(["export", "--state", str(first)]) == 0
    exported = capsys.readouterr().out
    entries = yaml.safe_load(exported)["mig-configs"]["current"]
    assert {"device-filter": "0x20B010DE", "devices": [1], "mig-enabled": False} in entries
    a100 = next(e for e in entries if e["devices"] == [0])
    assert a100["mig-devices"] == {"2c.4g.20gb": 1, "1c.4g.20gb": 2, "1g.5gb+me": 1, "1g.5gb": 2}
    exported_path = _write(tmp_path, exported, name="exported.yaml")
    assert main(["validate", "-f", str(exported_path)]) == 0
    # The exported file describes the node it came from, and rebuilds the same layout on a fresh one.
    assert main(["assert", "-f", str(exported_path), "--state", str(first)]) == 0
    assert main(["apply", "-f", str(exported_path), "--simulate", SPEC, "--state", str(second)]) == 0
    assert main(["assert", "-f", str(layout), "-c", "mixed", "--state", str(second)]) == 0
    capsys.readouterr()
    assert main(["export", "--state", str(second)]) == 0
    assert capsys.readouterr().out == exported


UNFILTERED_80GB_ONLY = (
    ALL_1G
    + """\
  fits-nowhere:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.5gb": 8}
"""
)


def test_an_unfiltered_entry_that_fits_some_models_is_valid_with_a_warning_for_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, UNFILTERED_80GB_ONLY)
    assert main(["validate", "-f", str(path), "-c", "all-1g.10gb", "-v"]) == 0
    captured = capsys.readouterr()
    assert "all-1g.10gb: valid on A100-80GB, H100-80GB-SXM, H100-80GB-PCIe\n" in captured.out
    assert "  skipped A100-40GB: [0] does not fit (see warning)\n" in captured.out
    assert "mig-configs.all-1g.10gb[0] would fail on A100-40GB" in captured.err
    assert main(["validate", "-f", str(path), "-c", "all-1g.10gb", "--gpu-model", "A100-40GB"]) == 1
    assert main(["validate", "-f", str(path), "-c", "fits-nowhere"]) == 1
    assert "mig-configs.fits-nowhere[0] on A100-40GB" in capsys.readouterr().err


def test_an_empty_config_file_argument_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-f", ""]) == 1
    assert capsys.readouterr().err == (
        "migagent validate: -f/--config-file is empty; give a layout file, or '-' for stdin\n"
    )


DEFAULT_NAMES = Path(__file__).resolve().parents[2] / "unit" / "layout" / "data" / "mig-parted-default-names.yaml"


def test_validate_checks_every_config_of_nvidias_default_config_on_a_catalog_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", "-f", str(DEFAULT_NAMES)]) == 0
    captured = capsys.readouterr()
    assert captured.out.endswith("mig-parted-default-names.yaml: 81 config(s) valid\n")
    assert "all-1g.10gb: valid on A100-40GB, A100-80GB, H100-80GB-SXM, H100-80GB-PCIe\n" in captured.out
    assert "all-1g.35gb: valid on H200-141GB, GB300-288GB\n" in captured.out
    # Every GPU NVIDIA's default config names has a catalog row (or driver variant): nothing is left unchecked.
    assert "not checked" not in captured.out + captured.err
    assert "partly checked" not in captured.out
    assert captured.err == ""
    assert "all-7g.189gb: valid on GB200-189GB\n" in captured.out
    assert "all-1g.24gb.gfx: valid on RTX-PRO-6000-96GB\n" in captured.out
