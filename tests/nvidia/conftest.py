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
from migagent_sim.gpu_node.nvidia_tools import missing_tools, tools_dir
from migagent_sim.nvidia_plugin import NvidiaTools
from tests.binaries_gate import BinariesGate

_GATE = BinariesGate(Path(__file__).resolve().parent, "MIGAGENT_REQUIRE_NVIDIA_TOOLS", missing_tools, timeout_s=900)
pytest_collection_modifyitems = _GATE.collection_modifyitems
pytest_terminal_summary = _GATE.terminal_summary


@pytest.fixture(scope="session")
def nvidia_tools() -> NvidiaTools:
    return NvidiaTools(tools_dir())


@pytest.fixture(scope="session")
def fake_library() -> Path:
    """The fake libnvidia-ml.so.1 and nvidia-smi, built once for this interpreter (cached by digest)."""
    return library_dir()
