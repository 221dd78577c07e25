"""The simulated kubelet on a node that other processes change through the fake libnvidia-ml.so.1: it sees
their changes, and they see the workloads it starts and ends (SharedFakeNvml over the state file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from migagent.sim import FakeNvml
from migagent.sim.state import SimNodeState
from migagent_sim.apiserver import FakeApiServer
from migagent_sim.cluster import DEMO_LAYOUTS, apply_directly
from migagent_sim.fakelib.node import StateFileNode
from migagent_sim.kubelet import FakeKubelet
from migagent_sim.shared_nvml import SharedFakeNvml, write_node
from tests.integration.agent.support import eventually

NODE = "gpu-node-1"
DEPLOY = "nvidia.com/gpu.deploy.device-plugin"


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """Two H100s in all-1g.10gb, written where the processes sharing the node read it."""
    layouts = tmp_path / "layouts.yaml"
    layouts.write_text(DEMO_LAYOUTS, encoding="utf-8")
    fake = FakeNvml.from_spec("2xH100-80GB-SXM")
    apply_directly(fake, layouts, "all-1g.10gb")
    path = tmp_path / "gpus" / "node.json"
    write_node(fake, path)
    return path


def _apply_elsewhere(state: Path, layout: str) -> None:
    """What another process does through the fake library: its NVML calls on the node in the file."""
    other = StateFileNode(state, spec=None)
    with other.session("apply") as fake:
        apply_directly(fake, state.parent.parent / "layouts.yaml", layout)


def test_a_change_saved_by_another_process_is_what_the_kubelet_reads_next(state: Path) -> None:
    shared = SharedFakeNvml(state)
    assert len(shared.state.gpus[0].gpu_instances) == 7

    _apply_elsewhere(state, "all-7g")

    assert [len(gpu.gpu_instances) for gpu in shared.state.gpus] == [1, 1]


def test_a_workload_started_and_ended_by_the_kubelet_is_seen_by_other_processes(state: Path) -> None:
    shared = SharedFakeNvml(state)
    uuid = shared.state.gpus[0].gpu_instances[0].compute_instances[0].uuid

    shared.sim_attach_process(uuid, pid=4242)

    on_disk = SimNodeState.load(state).gpus[0].gpu_instances[0].compute_instances[0]
    assert [p.pid for p in on_disk.processes] == [4242]
    with pytest.raises(RuntimeError, match="could not apply"):
        _apply_elsewhere(state, "all-7g")  # NVML refuses to destroy the busy instance

    shared.sim_detach_process(4242)
    assert SimNodeState.load(state).gpus[0].gpu_instances[0].compute_instances[0].processes == []


def test_a_refused_kubelet_change_leaves_the_file_as_it_was(state: Path) -> None:
    shared = SharedFakeNvml(state)
    before = state.read_bytes()
    with pytest.raises(ValueError, match="no GPU or MIG device"):
        shared.sim_attach_process("MIG-not-there", pid=1)
    assert state.read_bytes() == before


def test_the_kubelets_device_plugin_advertises_what_another_process_left_on_the_gpus(
    state: Path, tmp_path: Path
) -> None:
    with FakeApiServer(grace_scale=0.01) as api:
        api.add_node(NODE, labels={DEPLOY: "true"})
        kubelet = FakeKubelet(api, SharedFakeNvml(state), node_name=NODE, socket_path=str(tmp_path / "k.sock"))
        with kubelet:
            assert _nonzero(kubelet) == {"nvidia.com/mig-1g.10gb": 14}
            _apply_elsewhere(state, "all-7g")
            for value in ("paused-for-mig-change", "true"):  # the plugin restarts, as after any change
                api.update_node(NODE, _deploy_label(value))
            eventually(lambda: _nonzero(kubelet) == {"nvidia.com/mig-7g.80gb": 2}, what="the new layout advertised")


def _nonzero(kubelet: FakeKubelet) -> dict[str, int]:
    return {name: count for name, count in kubelet.advertised().items() if count}


def _deploy_label(value: str) -> Callable[[dict[str, Any]], None]:
    def edit(node: dict[str, Any]) -> None:
        node["metadata"]["labels"][DEPLOY] = value

    return edit
