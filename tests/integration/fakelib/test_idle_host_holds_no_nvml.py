"""An idle `migagent host` holds NVML on no device: another process's `nvidia-smi -r` succeeds.

The host runs in its own process over the fake libnvidia-ml.so.1 (the production NVML path, no
--simulate), whose `<state>.clients` file tells the fake nvidia-smi who holds NVML initialised, as
the real driver tells the real tool."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest

from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import pci_bus_id
from migagent_sim.fakelib.node import NvmlClients
from tests.integration.fakelib.support import library_env, nvidia_smi
from tests.integration.host.test_sdnotify import NotifySocket

LAYOUTS = """\
version: v1
mig-configs:
  a100-1g:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
"""


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[NotifySocket]:
    listener = NotifySocket(str(tmp_path / "notify.sock"))
    yield listener
    listener.close()


def test_an_idle_host_agent_lets_another_process_reset_the_gpu(
    fake_nvml_dir: Path, tmp_path: Path, notify_socket: NotifySocket
) -> None:
    state = tmp_path / "node.json"
    FakeNvml.from_spec("A100-80GB").save(state)  # MIG off: enabling it needs a reset (Ampere)
    layouts, selected = tmp_path / "layouts.yaml", tmp_path / "migagent.env"
    layouts.write_text(LAYOUTS, encoding="utf-8")
    selected.write_text("MIGAGENT_LAYOUT=a100-1g\n", encoding="utf-8")
    env = {**library_env(fake_nvml_dir, state), "NOTIFY_SOCKET": notify_socket.name}
    argv = [
        sys.executable, "-m", "migagent", "host", "-f", str(layouts), "--selected-layout-file", str(selected),
        "--journal-dir", str(tmp_path / "journal"), "--clients-state-file", "", "--debounce", "0.05",
    ]  # fmt: skip
    with open(tmp_path / "host.log", "wb") as log:
        host = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
        try:
            ready = notify_socket.receive_until("READY=1")
            holders = NvmlClients(state.with_name(f"{state.name}.clients")).live(exclude=os.getpid())
            reset = nvidia_smi(fake_nvml_dir, env, "-r", "-i", pci_bus_id(0))
            host.send_signal(signal.SIGTERM)
            code = host.wait(60)
        finally:
            if host.poll() is None:
                host.kill()
                host.wait()
    logs = (tmp_path / "host.log").read_text(encoding="utf-8")
    assert ready[-1] == "READY=1\nSTATUS=config a100-1g applied", logs
    assert host.pid not in holders, "the idle host agent still holds NVML initialised"
    assert reset.returncode == 0, reset.stderr
    assert code == 0, logs
    after = FakeNvml.load(state).state.gpus[0]
    assert after.mig_current == pynvml.NVML_DEVICE_MIG_ENABLE
    assert not after.gpu_instances, "the external reset ran: it destroyed the GIs the host created"
