"""An idle `migagent agent` holds NVML on no device: another process's `nvidia-smi -r` succeeds.

The agent runs in its own process over the fake libnvidia-ml.so.1 (no --simulate: pynvml loads the
library as on a real node), against the simulated cluster's API server and kubelet socket."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from migagent.sim.state import pci_bus_id
from migagent_sim.cluster import SimCluster
from migagent_sim.fakelib.node import NvmlClients
from tests.integration.agent.support import condition_reason, eventually
from tests.integration.fakelib.support import build, library_env, nvidia_smi


@pytest.fixture(scope="module")
def fake_nvml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("fake-nvml"))


def test_an_idle_agent_lets_another_process_reset_the_gpu(
    cluster: SimCluster, fake_nvml_dir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "gpus.json"
    cluster.fake.save(state)  # the agent's GPUs: the cluster's, already in the labelled layout
    env = library_env(fake_nvml_dir, state)
    argv = [
        sys.executable, "-m", "migagent", "agent",
        "--node-name", cluster.config.node_name,
        "--config-file", str(cluster.layout_file),
        "--kubeconfig", str(cluster.write_kubeconfig(tmp_path / "kubeconfig")),
        "--podresources-socket", cluster.socket_path,
        "--journal-dir", str(tmp_path / "journal"),
    ]  # fmt: skip
    with open(tmp_path / "agent.log", "wb") as log:
        agent = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
        try:
            eventually(lambda: condition_reason(cluster) == "Applied", what="the agent's report", timeout_s=60)
            holders = NvmlClients(state.with_name(f"{state.name}.clients")).live(exclude=os.getpid())
            reset = nvidia_smi(fake_nvml_dir, env, "-r", "-i", pci_bus_id(1))
            agent.send_signal(signal.SIGTERM)
            code = agent.wait(60)
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
    logs = (tmp_path / "agent.log").read_text(encoding="utf-8")
    assert agent.pid not in holders, "the idle agent still holds NVML initialised"
    assert reset.returncode == 0, reset.stderr
    assert code == 0, logs
