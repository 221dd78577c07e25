"""Driver variants share a PCI id (GB200 reports 186 or 189 GB): the row is chosen from the memory
the GPU reports, and a layout naming one variant's profiles means the same instances on the other,
so apply, assert and apply again agree on every row."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog

from migagent.cli import main

LAYOUTS = Path(__file__).resolve().parents[3] / "configs" / "mig-layouts" / "mig-layouts.yaml"


@pytest.fixture(autouse=True)
def _restore_logging() -> object:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.mark.parametrize("spec", ["1xGB200-189GB", "1xGB200-186GB"])
def test_apply_then_assert_then_apply_again_all_succeed_on_either_gb200_variant(tmp_path: Path, spec: str) -> None:
    state = ["--state", str(tmp_path / "node.json")]
    journal = ["--journal-dir", str(tmp_path / "journal")]
    layout = ["-f", str(LAYOUTS), "-c", "all-balanced"]
    assert main(["apply", "--simulate", spec, *state, *layout, *journal]) == 0
    assert main(["assert", *state, *layout]) == 0
    assert main(["apply", *state, *layout, *journal]) == 0


def test_validate_checks_a_device_filtered_entry_on_the_driver_variant_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-f", str(LAYOUTS), "-c", "all-balanced"]) == 0
    out = capsys.readouterr().out
    assert "GB200-189GB" in out.split("all-balanced: valid on", 1)[1].splitlines()[0]
