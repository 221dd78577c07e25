"""The real control plane, once per session, for every test under tests/realkube/.

Without the binaries (scripts/control_plane.sh not run), every test here is skipped at collection and
the run ends with one line naming the script. With MIGAGENT_REQUIRE_REAL_KUBE=1 (what .ci/run sets)
missing binaries are an error instead, so CI cannot pass with these tests skipped.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realkube.control_plane import SCRIPT, ControlPlane, binaries_built, binaries_dir, new_workdir
from tests.realkube.deployment import Deployer

_REQUIRED = os.environ.get("MIGAGENT_REQUIRE_REAL_KUBE") == "1"
_HERE = Path(__file__).resolve().parent
_SKIPPED = pytest.StashKey[tuple[int, str]]()


def _missing() -> str | None:
    directory = binaries_dir()
    if binaries_built(directory):
        return None
    return f"the real control plane is not built in {directory}: run {SCRIPT}"


_TIMEOUT_S = 900
"""pytest-timeout's bound for these tests: the first one also starts etcd, kube-apiserver and the
controller manager (each waited for up to 120 s), a minute or more on a loaded machine."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if _HERE in Path(str(item.path)).resolve().parents]
    for item in ours:
        item.add_marker(pytest.mark.timeout(_TIMEOUT_S))
    message = _missing() if ours else None
    if message is None:
        return
    if _REQUIRED:
        raise pytest.UsageError(f"MIGAGENT_REQUIRE_REAL_KUBE=1 and {message}")
    skip = pytest.mark.skip(reason=message)
    for item in ours:
        item.add_marker(skip)
    config.stash[_SKIPPED] = (len(ours), message)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if _SKIPPED in config.stash:
        count, message = config.stash[_SKIPPED]
        terminalreporter.write_line(f"tests/realkube: {count} tests skipped: {message}")


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
