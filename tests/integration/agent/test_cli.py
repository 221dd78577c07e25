"""`migagent agent` and `migagent demo` through `main`, as a user runs them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from migagent.cli import main
from migagent.layout.parse import load_layout_file, parse_layout
from migagent.layout.resolve import identity_of, resolve_config
from migagent.layout.strategy import MigStrategy
from migagent.nvml.driver import GpuDriver
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner
from migagent_sim import demo
from migagent_sim.cluster import DEMO_LAYOUTS, SimCluster, SimClusterConfig
from tests.integration.agent.support import condition_reason, eventually
from tests.integration.demos import STUCK_DEMO

ROOT = Path(__file__).resolve().parents[3]


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
        "--kubeconfig", str(cluster.write_kubeconfig(tmp_path / "kubeconfig")),
        "--podresources-socket", cluster.socket_path,
        "--journal-dir", str(tmp_path / "journal"),
        "--state", str(state),
        "--metrics-port", "0",
        "--metrics-address", "127.0.0.1",
    ])
    assert code == 0
    assert condition_reason(cluster) == "Applied"
    assert cluster.node()["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"


def test_the_demo_reconfigures_the_node_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", *STUCK_DEMO]) == 0
    out = capsys.readouterr().out
    assert "nvidia.com/mig-3g.40gb" in out
    assert "ml/inference-0" in out
    assert "evicted" in out
    assert "ml/batch-0       still running" in out
    # Each GPU before and after, and which changed.
    assert "  0    1g.10gbx7  1g.10gbx2+2g.20gb+3g.40gb  (kept 2 GPU instance(s) in place)" in out
    assert "GPUs changed: 0, 1, 2, 3, 4, 5, 6, 7" in out
    assert f"-f configs/mig-layouts/mig-layouts.yaml -c {demo.TARGET_LAYOUT[MigStrategy.MIXED]}" in out


def test_the_demos_agent_that_stops_on_its_own_is_restarted_as_its_daemonset_would_and_then_applies(
    cluster: SimCluster,
) -> None:
    pod = demo.DaemonSetAgent(cluster.start_agent)
    first = pod.running
    assert first is not None
    said: list[str] = []
    pod.keep_running(said.append)
    assert (pod.restarts, pod.running, said) == (0, first, []), "a running agent is left alone"

    first.stop_event.set()  # what the Lease's renewer does when it cannot renew: the agent's loop ends
    eventually(lambda: not first.alive, what="the first agent's loop to end")
    pod.keep_running(said.append)

    assert pod.restarts == 1
    restarted = pod.running
    assert restarted is not None
    assert restarted is not first
    assert restarted.alive
    assert not first.source.watching, "the stopped agent's label watch was left running"
    assert said == ["the agent stopped on its own; restarted as its DaemonSet's pod would be (restart 1)"]
    cluster.label("all-balanced")
    eventually(lambda: condition_reason(cluster) == "Applied", what="the restarted agent to apply all-balanced")


def test_a_tmpdir_too_long_for_the_demos_sockets_is_refused_in_one_line_and_nothing_is_left_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    long = tmp_path / ("t" * 90)  # the simulated kubelet's sockets under it pass the 107 bytes of sun_path
    long.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long))

    assert main(["demo"]) == 1

    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1
    assert said[0].startswith("migagent demo: ")
    assert "unix sockets allow at most 107" in said[0]
    assert "TMPDIR" in said[0]
    assert not list(long.iterdir()), "the simulated node that could not start left its folders"


def test_the_demos_layouts_are_the_shipped_files_on_its_node() -> None:
    """What the demo applies is what `migagent plan -f configs/mig-layouts/mig-layouts.yaml` resolves."""
    demo_file = parse_layout(DEMO_LAYOUTS, source="demo")
    shipped = load_layout_file(ROOT / demo.SHIPPED_LAYOUTS)
    fake = FakeNvml.from_spec(SimClusterConfig().spec)
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        gpus = [identity_of(gpu) for gpu in driver.observe().gpus]
    for name in (demo.START_LAYOUT, *demo.TARGET_LAYOUT.values(), *demo.REFUSED_LAYOUT.values()):
        ours = resolve_config(demo_file, name, gpus)
        theirs = resolve_config(shipped, name, gpus)
        assert ours == theirs, name


def test_the_single_strategy_demo_refuses_a_mixed_layout_untouched_then_advertises_nvidia_com_gpu(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--mig-strategy", "single", *STUCK_DEMO]) == 0
    out = capsys.readouterr().out
    assert "all-balanced refused: nothing on the node changed" in out
    table = out[out.index("advertised resource") :]
    assert re.search(r"nvidia\.com/gpu\s+56\s+16", table), table
    assert "nvidia.com/mig-" not in table
    assert "all-3g.40gb applied" in out


def test_the_none_strategy_demo_runs_and_prints_no_python_repr_and_no_grpc_log_line() -> None:
    # Documented and broken (exit 70: a MIG workload on a plugin advertising whole GPUs); stderr, after a
    # demo, carried gRPC's C-core lines (`chttp2_transport.cc ... GOAWAY`): a process of its own to see them.
    env = {key: value for key, value in os.environ.items() if not key.startswith("GRPC_")}
    run = subprocess.run([sys.executable, "-m", "migagent", "demo", "--mig-strategy", "none", *STUCK_DEMO],
                         env=env, capture_output=True, text=True, check=False, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr == ""
    assert "advertised nvidia.com/gpu: 8" in run.stdout
    assert re.search(r"nvidia\.com/gpu\s+8\s+8", run.stdout)
    assert not re.search(r"[\[{(]'", run.stdout), run.stdout  # no dict, list or tuple printed as Python's repr


@pytest.mark.parametrize("scenario", ["rollout", "autopilot"])
def test_the_pool_demos_refuse_the_node_demos_flags_rather_than_ignore_them(
    capsys: pytest.CaptureFixture[str], scenario: str
) -> None:
    assert main(["demo", scenario, "--mig-strategy", "single", "--linger", "5"]) == 2
    assert capsys.readouterr().err == (
        "migagent demo: --mig-strategy, --linger: only the node demo (`migagent demo`) takes them;"
        f" `migagent demo {scenario}` takes --timeout\n"
    )


@pytest.mark.parametrize(("flags", "suffix"), [((), ""), (("--rename-shared",), r"\.shared")])
def test_the_time_slicing_demo_advertises_instances_times_replicas_and_ends_applied(
    capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], suffix: str
) -> None:
    assert main(["demo", "--time-slicing", "2", *flags, *STUCK_DEMO]) == 0
    out = capsys.readouterr().out
    table = out[out.index("advertised resource") :]
    # 56 1g.10gb instances x 2 before; after all-balanced 16 x 2, and one 2g and one 3g per GPU x 2.
    assert re.search(rf"nvidia\.com/mig-1g\.10gb{suffix}\s+112\s+32", table), table
    assert re.search(rf"nvidia\.com/mig-3g\.40gb{suffix}\s+0\s+16", table), table
    assert "all-balanced applied" in out


def test_the_demo_refuses_zero_time_slicing_replicas_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:  # refused as the flag is parsed, as every count
        main(["demo", "--time-slicing", "0"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == "migagent demo: error: argument --time-slicing: must be at least 1, got 0"
