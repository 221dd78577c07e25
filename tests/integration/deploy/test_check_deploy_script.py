"""`scripts/check_deploy.sh` runs from a shell where no virtualenv is activated: it finds the checkout's
own .venv (it used `python` from PATH, which had no migagent: ModuleNotFoundError)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.integration.deploy.manifests import REPO, kubectl


def test_the_script_runs_without_an_activated_virtualenv(tmp_path: Path) -> None:
    # A checkout of its own whose .venv is this test's interpreter's (wherever CI made it), not activated.
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts/check_deploy.sh", tmp_path / "scripts")
    for name in ("deploy", "tests"):
        (tmp_path / name).symlink_to(REPO / name)
    (tmp_path / ".venv").symlink_to(sys.prefix)
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHON", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join([str(Path(kubectl()).parent), "/usr/bin", "/bin"])  # no venv's bin on it
    # --version: pytest says who it is and exits, so the kustomize renders run but no test is collected.
    run = subprocess.run([str(tmp_path / "scripts/check_deploy.sh"), "--version"], env=env, capture_output=True,
                         text=True, check=False, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "pytest" in run.stdout + run.stderr
