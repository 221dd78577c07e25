"""The head-to-head harness's own tests (bench/head_to_head) need, besides the real control plane that
tests/realkube/conftest.py gates on, NVIDIA's tools: without scripts/nvidia_tools.sh every test here is
skipped at collection with one line naming it; MIGAGENT_REQUIRE_HEAD_TO_HEAD=1 (what .ci/run sets)
makes that an error. They need root for the private mount namespaces of migagent_sim.gpu_node."""

from __future__ import annotations

from pathlib import Path

from migagent_sim.gpu_node.nvidia_tools import missing_tools
from tests.binaries_gate import BinariesGate

_GATE = BinariesGate(Path(__file__).resolve().parent, "MIGAGENT_REQUIRE_HEAD_TO_HEAD", missing_tools, timeout_s=1800)
pytest_collection_modifyitems = _GATE.collection_modifyitems
pytest_terminal_summary = _GATE.terminal_summary
