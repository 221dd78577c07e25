"""One run's simulated GPU node on the real control plane, the same for either manager.

- The GPUs: a FakeNvml node in a state file (MIGAGENT_FAKE_NVML_STATE), set to the start layout
  before anything runs. The manager under test reaches it through the fake libnvidia-ml.so.1 from its
  own process (mig-parted in Go, migagent in Python); the simulated kubelet through SharedFakeNvml.
- The kubelet (`FakeKubelet` over `RealKubeApi`: the kubelet's own identity for node and pod
  status), with the PodResources socket, workload pods holding MIG devices (an NVML process each),
  and the device plugin as the GPU Operator's DaemonSet runs it: its pod exists while
  `nvidia.com/gpu.deploy.device-plugin` is "true", and it advertises `nvidia.com/mig-*` in Node
  allocatable `plugin_lag_s` after it starts.
- The GPU Operator's other operands (`OperandPods`): GFD, DCGM, the DCGM exporter and the operator
  validator follow their deploy labels; the CUDA and plugin validators have run to completion.
- The Node carries what the GPU Operator puts there: every operand's deploy label "true",
  `nvidia.com/gpu.deploy.mig-manager=true`, `nvidia.com/mig.capable=true`, and the start layout in
  `nvidia.com/mig.config`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.head_to_head.gpus import GpuSnapshot, snapshot
from bench.head_to_head.recorder import Recorder
from migagent.layout.strategy import MigStrategy
from migagent.node.names import MIG_CONFIG_LABEL
from migagent.sim.fake_nvml import FakeNvml
from migagent_sim.cluster import apply_directly
from migagent_sim.cluster_config import SimClusterConfig, make_kubelet
from migagent_sim.kubelet_devices import read_inventory
from migagent_sim.operands import OPERANDS, OperandPods
from migagent_sim.shared_nvml import SharedFakeNvml, write_node
from tests.realkube.control_plane import ControlPlane
from tests.realkube.world import RealKubeApi

OPERATOR_NAMESPACE = "gpu-operator"
MIGAGENT_ACCOUNT = ("migagent", "migagent")


def operator_labels() -> dict[str, str]:
    """What the GPU Operator and GFD put on a MIG-capable node they run on (the layout label aside)."""
    deploy = ("device-plugin", *(o.component for o in OPERANDS), "mig-manager")
    return {**{f"nvidia.com/gpu.deploy.{component}": "true" for component in deploy}, "nvidia.com/mig.capable": "true"}


NODE = SimClusterConfig(labels=operator_labels(), plugin_lag_s=1.0)
"""8x H100 80GB SXM in all-1g.10gb; the device plugin advertises 1 s after its pod starts (mixed strategy)."""


def start_layout(settings: SimClusterConfig) -> str:
    if settings.start_layout is None:
        raise ValueError("the head-to-head starts from a layout: set SimClusterConfig.start_layout")
    return settings.start_layout


def expected_advertisement(settings: SimClusterConfig, layout: str, layout_file: Path) -> dict[str, int]:
    """What the device plugin advertises (mixed strategy) once `layout` is applied to a fresh node."""
    fake = FakeNvml.from_spec(settings.spec)
    apply_directly(fake, layout_file, layout)
    return {name: len(ids) for name, ids in read_inventory(fake, MigStrategy.MIXED).resources().items() if ids}


def write_start_node(settings: SimClusterConfig, layout_file: Path, path: Path) -> Path:
    """A fresh node of `settings.spec` in its start layout, in the state file at `path`."""
    start = FakeNvml.from_spec(settings.spec)
    apply_directly(start, layout_file, start_layout(settings))
    write_node(start, path)
    return path


class SimulatedNode:
    def __init__(self, plane: ControlPlane, workdir: Path, settings: SimClusterConfig) -> None:
        self.plane = plane
        self.settings = settings
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.layout_file = workdir / "mig-layouts.yaml"
        self.layout_file.write_text(settings.layouts_yaml, encoding="utf-8")
        self.state_path = write_start_node(settings, self.layout_file, workdir / "gpus" / "node.json")
        self.nvml = SharedFakeNvml(self.state_path)
        # A unix socket path must stay under ~107 bytes; run directories can be longer.
        self._socket_dir = Path(tempfile.mkdtemp(prefix="h2h-"))
        self.socket_path = str(self._socket_dir / "kubelet.sock")
        self.api = RealKubeApi(plane, settings.node_name, agent_account=MIGAGENT_ACCOUNT)
        self.kubelet = make_kubelet(settings, self.api, self.nvml, socket_path=self.socket_path)
        self.operands = OperandPods(self.api, node_name=settings.node_name, namespace=settings.plugin_namespace)
        self.recorder = Recorder(settings.node_name)

    @property
    def name(self) -> str:
        return self.settings.node_name

    def start(self) -> SimulatedNode:
        self.api.start()
        self.api.on_node_changed(self.recorder.node_changed)
        self.api.on_pod_deleted(self.recorder.pod_gone)
        self.api.add_node(self.name, labels={**self.settings.labels, MIG_CONFIG_LABEL: start_layout(self.settings)})
        self.kubelet.start()
        self.operands.start()
        return self

    def stop(self) -> None:
        self.operands.stop()
        self.kubelet.stop()
        self.api.stop()
        shutil.rmtree(self._socket_dir, ignore_errors=True)

    def gpus(self) -> GpuSnapshot:
        return snapshot(self.nvml)

    def label(self, layout: str) -> None:
        def edit(node: dict[str, Any]) -> None:
            node["metadata"]["labels"][MIG_CONFIG_LABEL] = layout

        self.api.update_node(self.name, edit)

    def mig_uuid(self, gpu: int, slot: int) -> str:
        for gi in self.nvml.state.gpus[gpu].gpu_instances:
            if gi.placement.start == slot and gi.compute_instances:
                return str(gi.compute_instances[0].uuid)
        raise KeyError(f"GPU {gpu} has no GPU instance at slot {slot}")
