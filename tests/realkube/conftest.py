"""The real control plane, once per session, for every test under tests/realkube/.

Without the binaries (scripts/control_plane.sh not run), every test here is skipped by one
`pytest.skip` in a session fixture, so the summary (-rs) shows one line naming the script. With
MIGAGENT_REQUIRE_REAL_KUBE=1 (what .ci/run sets) missing binaries fail the tests instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.realkube.control_plane import SCRIPT, ControlPlane, binaries_built, binaries_dir, new_workdir

_REQUIRED = os.environ.get("MIGAGENT_REQUIRE_REAL_KUBE") == "1"


@pytest.fixture(scope="session")
def _binaries() -> str:
    directory = binaries_dir()
    if not binaries_built(directory):
        message = f"the real control plane is not built in {directory}: run {SCRIPT}"
        if _REQUIRED:
            pytest.fail(f"MIGAGENT_REQUIRE_REAL_KUBE=1 and {message}", pytrace=False)
        pytest.skip(message)
    return str(directory)


@pytest.fixture(autouse=True)
def _needs_binaries(_binaries: str) -> None:
    """Every test here needs the binaries: skip (or fail) before anything starts."""


@pytest.fixture(scope="session")
def control_plane(_binaries: str) -> Iterator[ControlPlane]:
    workdir = new_workdir()
    plane = ControlPlane(binaries_dir(), workdir).start()
    try:
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(workdir, ignore_errors=True)
