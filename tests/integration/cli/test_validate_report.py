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


def test_skipped_and_unchecked_configs_are_not_counted_as_valid(
    layouts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "-f", str(layouts)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == f"{layouts}: 2 config(s) valid, 1 partly checked, 1 not checked"
    assert "other-only: not checked\n  skipped A100-40GB, A100-80GB" in out
    assert "  not checked: [0] device-filter 0x2C3110DE matches no catalog model\n" in out
    assert "a100-and-other: partly checked; valid on A100-40GB\n" in out
    assert "unfiltered-1g.6gb: valid on A30-24GB\n  skipped A100-40GB, A100-80GB, H100-80GB-SXM" in out


def test_with_named_models_a_filter_for_another_model_says_so_instead_of_matching_no_catalog_model(
    layouts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "-f", str(layouts), "-c", "a100-only", "--gpu-model", "H100-80GB-SXM"]) == 0
    assert capsys.readouterr().out == (
        "a100-only: not checked\n"
        "  skipped H100-80GB-SXM: not matched by any entry's device-filter\n"
        "  not checked: [0] device-filter 0x20B010DE matches A100-40GB, not among the models checked "
        "(H100-80GB-SXM)\n"
        f"{layouts}: 0 config(s) valid, 1 not checked\n"
    )
