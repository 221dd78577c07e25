"""`scripts/verify_units.sh`: systemd-analyze verify on the shipped units, failing on any warning."""

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.systemd.units import UNIT_DIR

SCRIPT = Path(__file__).parents[3] / "scripts" / "verify_units.sh"

needs_systemd_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None,
    reason="systemd-analyze is not installed here (package systemd); the units cannot be verified",
)


def _verify(unit_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), str(unit_dir)], capture_output=True, text=True, timeout=120, check=False
    )


@needs_systemd_analyze
def test_systemd_analyze_verify_finds_nothing_to_complain_about_in_the_shipped_units() -> None:
    result = _verify(UNIT_DIR)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("verify_units: OK: migagent-boot.service migagent-host.service")


@needs_systemd_analyze
def test_the_verify_script_fails_on_a_misspelt_key(tmp_path: Path) -> None:
    shutil.copytree(UNIT_DIR, tmp_path / "units")
    host = tmp_path / "units" / "migagent-host.service"
    host.write_text(host.read_text(encoding="utf-8").replace("NoNewPrivileges=", "NoNewPrivilege="), encoding="utf-8")
    result = _verify(tmp_path / "units")
    assert result.returncode == 1
    assert "Unknown key" in result.stderr


@needs_systemd_analyze
def test_the_verify_script_fails_on_an_ordering_cycle_through_a_typical_system_unit(tmp_path: Path) -> None:
    # The fabric manager waits for the network; ordering the boot apply before the network closes a loop.
    shutil.copytree(UNIT_DIR, tmp_path / "units")
    boot = tmp_path / "units" / "migagent-boot.service"
    # A second [Unit] section adds to the first, as a drop-in would.
    boot.write_text(boot.read_text(encoding="utf-8") + "\n[Unit]\nBefore=network-online.target\n", encoding="utf-8")
    result = _verify(tmp_path / "units")
    assert result.returncode == 1
    assert "ordering cycle" in result.stderr


@needs_systemd_analyze
def test_the_verify_script_finds_a_cycle_that_closes_only_through_the_target_the_unit_is_installed_in(
    tmp_path: Path,
) -> None:
    # The CDI refresh runs after multi-user.target, which wants (so runs after) the boot unit once it is
    # enabled: ordering the boot apply after the refresh is a loop only `systemctl enable` reveals.
    shutil.copytree(UNIT_DIR, tmp_path / "units")
    boot = tmp_path / "units" / "migagent-boot.service"
    text = boot.read_text(encoding="utf-8").replace("Before=nvidia-cdi-refresh.service ", "Before=")
    boot.write_text(text + "\n[Unit]\nAfter=nvidia-cdi-refresh.service\n", encoding="utf-8")
    result = _verify(tmp_path / "units")
    assert result.returncode == 1
    assert "ordering cycle" in result.stderr
