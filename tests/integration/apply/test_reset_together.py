"""Every GPU a plan resets is reset in one `nvidia-smi -r -i A,B,...`, as mig-parted does."""

from __future__ import annotations

from collections.abc import Callable

from structlog.testing import capture_logs

from migagent.planning import StepKind
from tests.integration.apply.support import SimNode


def test_an_ampere_mode_change_on_two_gpus_resets_both_in_one_command(make_node: Callable[[str], SimNode]) -> None:
    node = make_node("2xA100-40GB")
    resets = [s for s in node.plan("a100-balanced").steps if s.kind is StepKind.RESET_GPU]
    assert [s.gpu for s in resets] == [0, 1]
    with capture_logs() as logs:
        result = node.apply("a100-balanced")
    assert result.converged, result.error
    together = [e for e in logs if e["event"] == "gpus_reset_together"]
    assert [e["gpus"] for e in together] == [[0, 1]]
    # GPU 1's own reset step is skipped: the one command reset it with GPU 0
    [skipped] = [e["step"] for e in logs if e["event"] == "step_skipped"]
    assert skipped.startswith(f"GPU {resets[1].gpu}:")
    assert "reset" in skipped
