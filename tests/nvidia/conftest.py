"""NVIDIA's device plugin, config-manager and GPU Feature Discovery (k8s-device-plugin v0.18.2) as the
judges of what the agent expects the node to advertise, for every test under tests/nvidia/.

Without the binaries (scripts/nvidia_tools.sh not run), every test here is skipped at collection and
the run ends with one line naming the script. With MIGAGENT_REQUIRE_NVIDIA_TOOLS=1 (what .ci/run
sets) missing binaries are an error instead. The tests need root: the plugin runs in a pod of its own
(PID and mount namespaces), on a simulated node (private mount namespace, migagent_sim.gpu_node).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from migagent_sim.gpu_node.library import library_dir
from migagent_sim.nvidia_plugin import NvidiaTools
from tests.nvidia.tools import missing_tools, nvidia_tools_required, tools_dir

_REQUIRED = nvidia_tools_required()
_HERE = Path(__file__).resolve().parent
_SKIPPED = pytest.StashKey[tuple[int, str]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if _HERE in Path(str(item.path)).resolve().parents]
    message = missing_tools() if ours else None
    if message is None:
        return
    if _REQUIRED:
        raise pytest.UsageError(f"MIGAGENT_REQUIRE_NVIDIA_TOOLS=1 and {message}")
    skip = pytest.mark.skip(reason=message)
    for item in ours:
        item.add_marker(skip)
    config.stash[_SKIPPED] = (len(ours), message)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if _SKIPPED in config.stash:
        count, message = config.stash[_SKIPPED]
        terminalreporter.write_line(f"tests/nvidia: {count} tests skipped: {message}")


@pytest.fixture(scope="session")
def nvidia_tools() -> NvidiaTools:
    return NvidiaTools(tools_dir())


@pytest.fixture(scope="session")
def fake_library() -> Path:
    """The fake libnvidia-ml.so.1 and nvidia-smi, built once for this interpreter (cached by digest)."""
    return library_dir()
