"""What the autopilot needs from the cluster: the rollout's port, plus the demand and its own object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from migagent.node.scheduling import DemandNode, DemandPod
from migagent.rollout.codec import StoredObject
from migagent.rollout.port import RolloutPort

STATE_KEY = "state"


class AutopilotPort(RolloutPort, Protocol):
    def list_demand_nodes(self, selector: str) -> list[DemandNode]: ...

    def list_gpu_pods(self) -> list[DemandPod]:
        """Every pod that requests a GPU resource, pending or bound, in all namespaces."""
        ...

    def read_layouts(self) -> str: ...

    def read_autopilot(self) -> StoredObject | None: ...

    def write_autopilot(self, data: Mapping[str, str], resource_version: str) -> str:
        """Create the object (resource_version "") or replace it at that version; StateConflictError
        (a TransientError) when it changed since. Returns the new resourceVersion."""
        ...

    def record_event(self, *, node: str | None, reason: str, message: str, warning: bool) -> None:
        """An Event on the Node (or, with node None, on the autopilot's object)."""
        ...
