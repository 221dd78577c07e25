"""The state-file node behind the fake library: shared by processes through one file, saved after
every mutating call, and a GPU changed by another process has no live handles left here."""

from __future__ import annotations

import os
from pathlib import Path

import pynvml
import pytest

from migagent.sim.state import SimNodeState, pci_bus_id
from migagent_sim.fakelib.node import NodeConfigError, StateFileNode


def _enable_mig(node: StateFileNode) -> None:
    with node.session("init") as fake:
        fake.nvmlInit()
    with node.session("set_mig_mode") as fake:
        fake.nvmlDeviceSetMigMode(fake.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_DEVICE_MIG_ENABLE)


def test_a_mutating_call_is_on_disk_when_it_returns_and_a_read_writes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "node.json"
    node = StateFileNode(state, spec="H100-80GB-SXM")
    _enable_mig(node)
    assert SimNodeState.load(state).gpus[0].mig_current == pynvml.NVML_DEVICE_MIG_ENABLE  # Hopper: at once
    before = state.stat().st_mtime_ns
    with node.session("mig_mode") as fake:
        fake.nvmlDeviceGetMigMode(fake.nvmlDeviceGetHandleByIndex(0))
    assert state.stat().st_mtime_ns == before


def test_a_gpu_reset_by_another_process_leaves_no_live_handle_here(tmp_path: Path) -> None:
    state = tmp_path / "node.json"
    ours = StateFileNode(state, spec="2xA100-80GB")
    with ours.session("init") as fake:
        fake.nvmlInit()
        gpu0, gpu1 = fake.nvmlDeviceGetHandleByIndex(0), fake.nvmlDeviceGetHandleByIndex(1)
        fake.nvmlDeviceSetMigMode(gpu0, pynvml.NVML_DEVICE_MIG_ENABLE)  # Ampere: pending until reset

    other = StateFileNode(state, spec=None)  # what the fake nvidia-smi does in its own process
    with other.session("reset") as fake:
        fake.sim_reset_gpu(pci_bus_id(0))

    with ours.session("mig_mode") as fake:
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            fake.nvmlDeviceGetMigMode(gpu0)
        assert fake.nvmlDeviceGetMigMode(fake.nvmlDeviceGetHandleByIndex(0)) == [1, 1]
        assert fake.nvmlDeviceGetMigMode(gpu1) == [0, 0], "an untouched GPU keeps its handles"


def test_init_and_shutdown_are_recorded_per_process_for_nvidia_smi(tmp_path: Path) -> None:
    node = StateFileNode(tmp_path / "node.json", spec="A100-80GB")
    for _ in range(2):
        with node.session("init") as fake:
            fake.nvmlInit()
    with node.session("shutdown") as fake:
        fake.nvmlShutdown()
    assert node.clients.read() == {os.getpid(): 1}
    assert node.clients.live(exclude=0) == [os.getpid()]
    assert node.clients.live(exclude=os.getpid()) == []
    with node.session("shutdown") as fake:
        fake.nvmlShutdown()
    assert node.clients.read() == {}


def test_a_node_without_state_or_spec_is_a_clear_error(tmp_path: Path) -> None:
    node = StateFileNode(tmp_path / "node.json", spec=None)
    with pytest.raises(NodeConfigError, match="MIGAGENT_FAKE_NVML_SPEC"), node.session("init"):
        pass
    with pytest.raises(NodeConfigError, match="unknown GPU model"), StateFileNode(
        tmp_path / "other.json", spec="Z100"
    ).session("init"):
        pass
    (tmp_path / "broken.json").write_text("{}")
    with pytest.raises(NodeConfigError, match="cannot load"), StateFileNode(
        tmp_path / "broken.json", spec=None
    ).session("init"):
        pass
    assert not (tmp_path / "node.json").exists()
