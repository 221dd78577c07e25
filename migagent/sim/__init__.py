"""The simulator shipped with migagent: a stateful FakeNvml (and, beside it, fake Kubernetes pieces)."""

from __future__ import annotations

from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.spec import NodeSpecError, parse_node_spec
from migagent.sim.state import SimNodeState

__all__ = ["FakeNvml", "NodeSpecError", "SimNodeState", "parse_node_spec"]
