"""The Node tells the truth when the agent cannot work: `migagent agent` whose NVML cannot be initialised
(the fake libnvidia-ml.so.1 with no node behind it) reports `failed` with reason NvmlUnavailable and
exits 1 with one line, instead of leaving the Node saying `success` for a layout it cannot see."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from migagent_sim.cluster import SimCluster
from tests.integration.agent.support import condition, state
from tests.integration.fakelib.support import build, library_env


@pytest.fixture(scope="module")
def fake_nvml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("fake-nvml"))


def test_an_agent_whose_nvml_cannot_be_initialised_reports_failed_naming_nvml_and_exits_1(
    cluster: SimCluster, fake_nvml_dir: Path, tmp_path: Path
) -> None:
    assert state(cluster) is None or state(cluster) == "success"
    env = library_env(fake_nvml_dir, tmp_path / "missing.json")  # no such node and no spec: nvmlInit fails
    done = subprocess.run(
        [
            sys.executable, "-m", "migagent", "agent",
            "--node-name", cluster.config.node_name,
            "--config-file", str(cluster.layout_file),
            "--kubeconfig", str(cluster.write_kubeconfig(tmp_path / "kubeconfig")),
            "--journal-dir", str(tmp_path / "journal"),
            "--podresources-socket", cluster.socket_path,
        ],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 1, done.stderr
    # (the fake library prints its own line about the missing node first, as a real one logs to syslog)
    lines = [line for line in done.stderr.splitlines() if line.startswith("migagent agent:")]
    [line] = lines
    assert "nvmlInit" in line, done.stderr
    assert state(cluster) == "failed"
    reported = condition(cluster)
    assert reported["reason"] == "NvmlUnavailable"
    assert "cannot initialise NVML" in reported["message"]
    assert not cluster.node()["spec"].get("unschedulable")
    assert not [r for r in cluster.api.requests if r.subresource == "eviction"]
