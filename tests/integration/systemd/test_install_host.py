"""scripts/install_host.sh, the systemd install step, run into a temporary root as an admin runs it
into /: the venv, the /usr/local/bin link the units run, the units and a settings file that selects
nothing; a second run (an upgrade) keeps the admin's settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from migagent.sources.files import read_selected_layout
from tests.integration.systemd.units import UNIT_DIR

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "install_host.sh"


def _install(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ROOT": str(root), "PYTHON": sys.executable}
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, check=False, timeout=600)


def test_install_host_lays_out_everything_the_units_name_and_selects_no_layout(tmp_path: Path) -> None:
    root = tmp_path / "root"
    first = _install(root)
    assert first.returncode == 0, first.stderr
    link = root / "usr" / "local" / "bin" / "migagent"
    assert os.readlink(link) == "/opt/migagent/bin/migagent"
    program = root / "opt" / "migagent" / "bin" / "migagent"
    version = subprocess.run([str(program), "--version"], capture_output=True, text=True, check=True, timeout=60)
    assert "0.1.0" in version.stdout
    units = root / "etc" / "systemd" / "system"
    for name in ("migagent-boot.service", "migagent-host.service", "nvidia-gpu-reset.target"):
        assert (units / name).read_text(encoding="utf-8") == (UNIT_DIR / name).read_text(encoding="utf-8")
    env_file = root / "etc" / "migagent" / "migagent.env"
    assert read_selected_layout(env_file) == ""  # nothing changes until the admin names a layout
    layouts = root / "etc" / "migagent" / "layouts.yaml"
    check = subprocess.run(
        [str(program), "validate", "-f", str(layouts), "-c", "all-disabled"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "MIGAGENT_LAYOUT=<name>" in first.stdout

    env_file.write_text("MIGAGENT_LAYOUT=all-1g.10gb\n", encoding="utf-8")
    again = _install(root)
    assert again.returncode == 0, again.stderr
    assert "keeping" in again.stdout
    assert read_selected_layout(env_file) == "all-1g.10gb"
