"""`migagent demo rollout`: six nodes in waves, one made to fail, the halt, and the resume."""

from __future__ import annotations

import pytest

from migagent.cli import main
from tests.integration.demos import STUCK_DEMO


def test_demo_rollout_halts_on_the_failed_node_and_resumes_to_the_end(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "rollout", *STUCK_DEMO]) == 0
    out = capsys.readouterr().out
    assert "canary wave 1: gpu-h100-1" in out
    failed = next(line for line in out.splitlines() if line.startswith("gpu-h100-4 FAILED: "))
    assert "NVML_ERROR_GPU_IS_LOST" in failed
    halted_table = out[out.index("HALTED"):out.index("rollout demo: halted")]
    assert "in-flight" not in halted_table  # the halt let the nodes in flight finish first
    assert "HALTED after 1 failed node(s) (--failure-budget 1): gpu-h100-4:" in out
    halted_at, resumed_at = out.index("HALTED"), out.index("migagent rollout resume demo")
    assert halted_at < resumed_at
    assert "gpu-h100-4 done" in out[resumed_at:]
    assert "rollout demo: done" in out
    assert "each node's layout label changed [1] time(s); at most 4 GPUs were out of service at once" in out
    assert out.rstrip().endswith("rollout demo succeeded")
