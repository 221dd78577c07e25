"""`migagent validate` prints, per config, where it was checked, what was skipped and why, and
counts a config valid only when every entry was checked (issue 11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from migagent.cli import main

LAYOUTS = (
    "version: v1\nmig-configs:\n"
    '  a100-only:\n    - {device-filter: "0x20B010DE", devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 7}}\n'
    '  other-only:\n    - {device-filter: "0x2C3110DE", devices: all, mig-enabled: true, mig-devices: {"1g.23gb": 7}}\n'
    "  a100-and-other:\n"
    '    - {device-filter: "0x20B010DE", devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 7}}\n'
    '    - {device-filter: "0x2C3110DE", devices: all, mig-enabled: true, mig-devices: {"1g.23gb": 7}}\n'
    '  unfiltered-1g.6gb:\n    - {devices: all, mig-enabled: true, mig-devices: {"1g.6gb": 4}}\n'
)


@pytest.fixture
def layouts(tmp_path: Path) -> Path:
    path = tmp_path / "l.yaml"
    path.write_text(LAYOUTS, encoding="utf-8")
    return path


def test_one_line_per_config_and_a_config_checked_nowhere_fails_the_run(
    layouts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "-f", str(layouts)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "a100-only: valid on A100-40GB",
        "other-only: NOT CHECKED: [0] device-filter 0x2C3110DE matches no catalog model",
        "a100-and-other: partly checked; valid on A100-40GB; not checked: [1] device-filter 0x2C3110DE matches"
        " no catalog model",
        "unfiltered-1g.6gb: valid on A30-24GB",
    ]
    assert captured.err == (
        f"migagent validate: {layouts}: 1 problem(s):\n"
        "mig-configs.other-only: could not be checked on any catalog GPU model"
        " ([0] device-filter 0x2C3110DE matches no catalog model)\n"
    )


def test_skipped_and_unchecked_configs_are_not_counted_as_valid(
    layouts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "-f", str(layouts), "-c", "a100-and-other"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{layouts}: 0 config(s) valid, 1 partly checked"
    assert main(["validate", "-f", str(layouts), "-c", "unfiltered-1g.6gb", "-v"]) == 0
    out = capsys.readouterr().out
    assert "unfiltered-1g.6gb: valid on A30-24GB\n  checked entries [0] on A30-24GB\n  skipped " in out


def test_with_named_models_a_filter_for_another_model_says_so_instead_of_matching_no_catalog_model(
    layouts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "-f", str(layouts), "-c", "a100-only", "--gpu-model", "H100-80GB-SXM"]) == 1
    captured = capsys.readouterr()
    assert captured.out == (
        "a100-only: NOT CHECKED: [0] device-filter 0x20B010DE matches A100-40GB, not among the models checked "
        "(H100-80GB-SXM)\n"
    )
    assert "could not be checked on any catalog GPU model" in captured.err


def test_a_config_valid_on_the_named_model_says_so_in_a_short_line_and_counts_as_valid(
    capsys: pytest.CaptureFixture[str]
) -> None:
    # As the troubleshooting table has it: is this config valid on my GPU? Its entries for other models
    # (device filters of other GPUs) are said in a few words, not listed in a line of 1,000 characters.
    shipped = str(Path(__file__).resolve().parents[3] / "configs/mig-layouts/mig-layouts.yaml")
    assert main(["validate", "-f", shipped, "-c", "all-balanced", "--gpu-model", "H100-80GB-SXM"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "all-balanced: valid on H100-80GB-SXM; entries [0, 2-11] are for other models",
        f"{shipped}: 1 config(s) valid",
    ]


def test_a_profile_no_model_offers_fails_validation_with_the_profiles_of_that_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(
        'version: v1\nmig-configs:\n  typo:\n    - {devices: all, mig-enabled: true, mig-devices: {"1g.11gb": 7}}\n',
        encoding="utf-8",
    )
    assert main(["validate", "-f", str(path), "-c", "typo"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "typo: INVALID: 1 problem(s), listed below\n"
    assert "mig-configs.typo[0]: profile '1g.11gb' is offered by no catalog GPU model (1g profiles: 1g.5gb," in (
        captured.err
    )


def test_verbose_output_of_a_large_config_is_grouped_and_wrapped_not_one_line_per_detail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = "".join(
        f"    - devices: [{i % 8}]\n      mig-enabled: true\n      mig-devices: {{\"1g.10gb\": 7}}\n"
        for i in range(200)
    )
    (tmp_path / "large.yaml").write_text(f"version: v1\nmig-configs:\n  large:\n{entries}", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # the summary line names the file: its length is the file's, not the wrapping's
    assert main(["validate", "-f", "large.yaml", "-v"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert max(len(line) for line in lines) <= 100, [line for line in lines if len(line) > 100]
    assert "  checked entries [0-199] on 3 models: A100-80GB, H100-80GB-SXM, H100-80GB-PCIe" in lines
    assert "  skipped A100-40GB; why: [0-199] do not fit (see warning)" in lines
    assert len(lines) < 12
    (warning,) = captured.err.splitlines()  # the same misfit of 200 entries, said once
    assert warning.startswith("  warning: mig-configs.large[0-199] would fail on A100-40GB")
