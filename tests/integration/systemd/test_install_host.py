"""scripts/install_host.sh, the systemd install step, run into a temporary root as an admin runs it
into /: the venv, the /usr/local/bin link the units run, the units and a settings file that selects
nothing; run again (an upgrade), a new release is switched in by one rename while a process started
from the previous one keeps running from it, the admin's settings are kept, and it says what to restart."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from migagent.sources.files import read_selected_layout
from tests.integration.systemd.units import UNIT_DIR

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "install_host.sh"
LINK_TARGET = "/opt/migagent/current/bin/migagent"


def _install(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ROOT": str(root), "PYTHON": sys.executable}
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, check=False, timeout=600)


def _current(root: Path) -> Path:
    return (root / "opt" / "migagent" / "current").resolve()


def test_install_host_lays_out_everything_the_units_name_and_selects_no_layout(tmp_path: Path) -> None:
    root = tmp_path / "root"
    # With a second install from this checkout at the same time: pip builds in the folder it installs
    # from, so each builds its own copy (two builds in the checkout's build/ failed with "File exists").
    with ThreadPoolExecutor(2) as both:
        first, beside = both.map(_install, (root, tmp_path / "beside"))
    assert first.returncode == 0, first.stderr
    assert beside.returncode == 0, beside.stderr
    link = root / "usr" / "local" / "bin" / "migagent"
    assert os.readlink(link) == LINK_TARGET
    program = root / "opt" / "migagent" / "current" / "bin" / "migagent"
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
    assert "Nothing runs yet" in first.stdout
    assert "MIGAGENT_LAYOUT=<name>" in first.stdout


def test_an_upgrade_switches_releases_atomically_while_what_runs_keeps_its_own_and_says_what_to_restart(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    assert _install(root).returncode == 0
    env_file = root / "etc" / "migagent" / "migagent.env"
    env_file.write_text("MIGAGENT_LAYOUT=all-1g.10gb\n", encoding="utf-8")
    first = _current(root)
    # What host mode is across upgrades: a process of the first release that imports lazily, later.
    later = "input(); import migagent.cli.rollout, migagent; print(migagent.__file__)"
    running = subprocess.Popen(
        [str(first / "bin" / "python"), "-I", "-c", later],  # -I: not the checkout in the working directory
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        again = _install(root)
        second = _current(root)
        third = _install(root)  # not restarted since two upgrades: its release is still in use
        previous = _current(root)
        out, _ = running.communicate("go\n", timeout=60)
    finally:
        running.kill()
    assert again.returncode == 0, again.stderr
    assert third.returncode == 0, third.stderr
    assert running.returncode == 0
    assert out.strip().startswith(str(first))  # it ran on from its own release, untouched
    assert second != first
    assert first.is_dir()
    assert "upgraded to migagent 0.1.0" in again.stdout
    assert "systemctl restart migagent-host.service" in again.stdout
    assert "Nothing runs yet" not in again.stdout
    assert "keeping" in again.stdout
    assert read_selected_layout(env_file) == "all-1g.10gb"
    assert os.readlink(root / "usr" / "local" / "bin" / "migagent") == LINK_TARGET
    assert not list((root / "opt" / "migagent").glob("current.new*"))
    kept = f"keeping /opt/migagent/releases/{first.name}: a process still runs from it"
    assert kept in third.stdout

    assert _install(root).returncode == 0  # nothing runs from the first release or the second now
    assert not first.exists()
    assert not second.exists()
    assert {p.name for p in (root / "opt" / "migagent" / "releases").iterdir()} == {_current(root).name, previous.name}


def test_an_upgrade_from_the_flat_venv_layout_leaves_that_venv_to_what_runs_from_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    legacy = root / "opt" / "migagent"
    (legacy / "bin").mkdir(parents=True)
    (legacy / "pyvenv.cfg").write_text("home = /usr/bin\n", encoding="utf-8")
    (legacy / "bin" / "migagent").write_text("#!/bin/sh\necho old\n", encoding="utf-8")
    (root / "usr" / "local" / "bin").mkdir(parents=True)
    (root / "usr" / "local" / "bin" / "migagent").symlink_to("/opt/migagent/bin/migagent")

    upgraded = _install(root)

    assert upgraded.returncode == 0, upgraded.stderr
    assert os.readlink(root / "usr" / "local" / "bin" / "migagent") == LINK_TARGET
    assert (legacy / "bin" / "migagent").read_text(encoding="utf-8") == "#!/bin/sh\necho old\n"
    assert "systemctl restart migagent-host.service" in upgraded.stdout
    assert "rm -rf /opt/migagent/bin /opt/migagent/include" in upgraded.stdout
