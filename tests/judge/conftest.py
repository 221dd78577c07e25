"""NVIDIA's own tools as the judge of the GPU side, for every test under tests/judge/.

Without the binaries (scripts/nvidia_tools.sh not run), every test here is skipped at collection and
the run ends with one line naming the script. With MIGAGENT_REQUIRE_NVIDIA_TOOLS=1 (what .ci/run
sets) missing binaries are an error instead, so CI cannot pass with these tests skipped. The
tests need root for their private mount namespaces (mounts.py), as .ci/run has.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from migagent_sim.gpu_node.library import library_dir
from migagent_sim.gpu_node.nvidia_tools import missing_tools, tools_dir
from tests.binaries_gate import BinariesGate

_GATE = BinariesGate(Path(__file__).resolve().parent, "MIGAGENT_REQUIRE_NVIDIA_TOOLS", missing_tools, timeout_s=1800)
pytest_collection_modifyitems = _GATE.collection_modifyitems
pytest_terminal_summary = _GATE.terminal_summary


@pytest.fixture(scope="session")
def nvidia_tools() -> Path:
    return tools_dir()


@pytest.fixture(scope="session")
def fake_library() -> Path:
    """The fake libnvidia-ml.so.1 and nvidia-smi, built once for this interpreter (cached by digest)."""
    return library_dir()
