"""For a test module outside tests/nvidia that runs NVIDIA's tools: skip it without them, with the
script named (or fail at collection when MIGAGENT_REQUIRE_NVIDIA_TOOLS=1, as tests/binaries_gate does)."""

from __future__ import annotations

import os

import pytest

from migagent_sim.gpu_node.nvidia_tools import missing_tools


def needs_nvidia_tools() -> pytest.MarkDecorator:
    message = missing_tools()
    if message is not None and os.environ.get("MIGAGENT_REQUIRE_NVIDIA_TOOLS") == "1":
        pytest.fail(f"MIGAGENT_REQUIRE_NVIDIA_TOOLS=1 and {message}", pytrace=False)
    return pytest.mark.skipif(message is not None, reason=message or "")
