"""The real control plane, once per session, for every test under tests/realkube/.

Without the binaries (scripts/control_plane.sh not run), every test here is skipped at collection and
the run ends with one line naming the script. With MIGAGENT_REQUIRE_REAL_KUBE=1 (what .ci/run sets)
missing binaries are an error instead, so CI cannot pass with these tests skipped.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.binaries_gate import BinariesGate
from tests.realkube.control_plane import SCRIPT, ControlPlane, binaries_built, binaries_dir, new_workdir
from tests.realkube.deployment import Deployer


def _missing() -> str | None:
    directory = binaries_dir()
    if binaries_built(directory):
        return None
    return f"the real control plane is not built in {directory}: run {SCRIPT}"


_GATE = BinariesGate(Path(__file__).resolve().parent, "MIGAGENT_REQUIRE_REAL_KUBE", _missing, timeout_s=900)
"""900 s for pytest-timeout: the first test also starts etcd, kube-apiserver, the controller manager
and the scheduler (each waited for up to 120 s), a minute or more on a loaded machine."""
pytest_collection_modifyitems = _GATE.collection_modifyitems
pytest_terminal_summary = _GATE.terminal_summary


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    workdir = new_workdir()
    plane = ControlPlane(binaries_dir(), workdir).start()
    try:
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def deployer(control_plane: ControlPlane) -> Deployer:
    """The one record of which deploy/ variant is installed: every test that needs one asks it, so a
    variant's leftovers (a component's grant) are removed whichever test installed it."""
    return Deployer(control_plane)
