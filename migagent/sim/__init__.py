"""The simulator shipped with migagent: a stateful FakeNvml behind `--simulate` and its state file.
The Python side of the fake libnvidia-ml.so.1 and the fake Kubernetes pieces (API server, kubelet,
device plugin, the simulated cluster and `migagent demo`) are the separate `migagent_sim` distribution."""

from __future__ import annotations

from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.spec import NodeSpecError, parse_node_spec
from migagent.sim.state import SimNodeState

__all__ = ["FakeNvml", "NodeSpecError", "SimNodeState", "parse_node_spec"]
