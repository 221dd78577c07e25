"""`migagent agent` and `migagent demo` through `main`, as a user runs them."""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from migagent.cli import main
from migagent.cli.simcluster import SimCluster
from tests.integration.agent.support import condition_reason, eventually


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """`main` points structlog at this test's captured stderr; later tests must not log there."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def test_the_agent_refuses_to_start_without_a_node_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    layout = tmp_path / "layouts.yaml"
    layout.write_text("version: v1\nmig-configs:\n  none:\n    - devices: all\n      mig-enabled: false\n")
    code = main(
        ["agent", "--config-file", str(layout), "--simulate", "1xH100-80GB-SXM", "--api-server", "http://127.0.0.1:9"]
    )
    assert code == 1
    assert "NODE_NAME" in capsys.readouterr().err


def test_the_agent_command_reports_the_layout_and_stops_cleanly_on_sigterm(cluster: SimCluster, tmp_path: Path) -> None:
    # The agent process gets its own simulated GPUs, a copy of the cluster's (same layout).
    state = tmp_path / "gpus.json"
    cluster.fake.save(state)
    main_thread = threading.main_thread().ident
    assert main_thread is not None

    def terminate_when_reported() -> None:
        try:
            eventually(lambda: condition_reason(cluster) == "Applied", what="the agent's report", timeout_s=20)
        finally:
            signal.pthread_kill(main_thread, signal.SIGTERM)

    threading.Thread(target=terminate_when_reported, daemon=True).start()
    code = main([
        "agent",
        "--node-name", cluster.config.node_name,
        "--config-file", str(cluster.layout_file),
        "--api-server", cluster.api.url,
        "--podresources-socket", cluster.socket_path,
        "--journal-dir", str(tmp_path / "journal"),
        "--state", str(state),
        "--metrics-port", "0",
        "--metrics-address", "127.0.0.1",
    ])
    assert code == 0
    assert condition_reason(cluster) == "Applied"
    assert cluster.node()["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"


def test_the_demo_reconfigures_half_the_node_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "nvidia.com/mig-3g.40gb" in out
    assert "ml/inference-0" in out
    assert "evicted" in out
    assert "ml/batch-0       still running" in out


def test_the_single_strategy_demo_refuses_a_mixed_layout_untouched_then_advertises_nvidia_com_gpu(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--mig-strategy", "single"]) == 0
    out = capsys.readouterr().out
    assert "half-balanced refused: nothing on the node changed" in out
    table = out[out.index("advertised resource") :]
    assert re.search(r"nvidia\.com/gpu\s+56\s+16", table), table
    assert "nvidia.com/mig-" not in table
    assert "all-3g.40gb applied" in out
