"""One row of `migagent status` per MIG node, from the Node alone: the labels the admin and the agent
set, the MigConfigReady condition, the migagent.io annotations the agent writes and Node allocatable.

Pure: no API calls here, so a row can be built from a listed Node or a watch event alike.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from migagent.jsontext import decode_json
from migagent.node.names import (
    CONDITION_TYPE,
    GPU_RESOURCE,
    LAST_ERROR_ANNOTATION,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_RESOURCE_PREFIX,
    OBSERVED_ANNOTATION,
    PREFIX,
    MigConfigState,
    action_for,
)
from migagent.node.port import NodeView

MIG_CAPABLE_LABEL = "nvidia.com/mig.capable"  # set by GPU Feature Discovery on MIG-capable nodes
ENABLED_LABEL = "migagent.io/enabled"  # set by the admin where the standalone overlay runs the agent


@dataclass(frozen=True)
class GpuHolding:
    index: int
    mode: str  # enabled | disabled, and " -> enabled" when a mode change waits for a reset
    devices: dict[str, int]  # MIG device (CI profile) name -> count

    def describe(self) -> str:
        if not self.mode.startswith("enabled"):
            return f"MIG {self.mode}"
        held = "+".join(f"{name}x{count}" if count > 1 else name for name, count in sorted(self.devices.items()))
        return held or "MIG enabled, empty"


@dataclass(frozen=True)
class FleetRow:
    node: str
    desired: str
    state: str
    reason: str
    since: str | None  # the condition's lastTransitionTime (RFC 3339)
    gpus: tuple[GpuHolding, ...] | None  # None: the agent has not reported them (no migagent.io/observed)
    advertised: dict[str, int]  # nvidia.com/mig-* (else nvidia.com/gpu, gpu.shared) allocatable, prefix dropped
    last_error: str

    @property
    def action(self) -> str:
        """A failed node's suggested action, from its condition's reason code (node.names.ConditionReason)."""
        return action_for(self.reason) if self.state == MigConfigState.FAILED else ""

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "action": self.action}


def is_mig_node(node: NodeView) -> bool:
    """A node an admin or migagent has marked for MIG: a mig.config label or state, GPU Feature
    Discovery's mig.capable=true, migagent.io/enabled=true (the standalone overlay's selector), or any
    migagent.io annotation."""
    return (
        MIG_CONFIG_LABEL in node.labels
        or MIG_CONFIG_STATE_LABEL in node.labels
        or node.labels.get(MIG_CAPABLE_LABEL) == "true"
        or node.labels.get(ENABLED_LABEL) == "true"
        or any(key.startswith(PREFIX) for key in node.annotations)
    )


def _gpu_holding(entry: dict[str, Any]) -> GpuHolding:
    mode = str(entry.get("mode", "unknown"))
    if "pending_mode" in entry:
        mode = f"{mode} -> {entry['pending_mode']}"
    devices: Counter[str] = Counter()
    for gi in entry.get("gpu_instances") or ():
        names = gi.get("compute_instances") or [gi.get("profile", f"GI profile {gi.get('profile_id')}")]
        devices.update(str(name) for name in names)
    return GpuHolding(index=int(entry.get("index", -1)), mode=mode, devices=dict(devices))


def gpu_holdings(annotation: str | None) -> tuple[GpuHolding, ...] | None:
    """The GPUs of the agent's `migagent.io/observed` annotation; None when absent or not what the
    agent writes (a hand-edited value is shown as unknown rather than failing the whole table)."""
    if not annotation:
        return None
    try:
        entries = decode_json(annotation)
        return tuple(_gpu_holding(entry) for entry in entries)
    except (ValueError, TypeError, AttributeError):
        return None


def advertised(node: NodeView) -> dict[str, int]:
    mig = {
        name.removeprefix("nvidia.com/"): count
        for name, count in node.allocatable.items()
        if name.startswith(MIG_RESOURCE_PREFIX)
    }
    if mig:  # replicated MIG resources (time-slicing) show their replicas: mig-1g.10gb=14 for 7 x 2
        return dict(sorted(mig.items()))
    return {  # whole GPUs, or single-strategy MIG devices, renamed nvidia.com/gpu.shared when replicated
        name.removeprefix("nvidia.com/"): count
        for name, count in sorted(node.allocatable.items())
        if name == GPU_RESOURCE or (name.startswith(GPU_RESOURCE + ".") and count)
    }


def fleet_row(node: NodeView) -> FleetRow:
    condition = node.condition(CONDITION_TYPE)
    return FleetRow(
        node=node.name,
        desired=node.labels.get(MIG_CONFIG_LABEL, ""),
        state=node.labels.get(MIG_CONFIG_STATE_LABEL, ""),
        reason=condition.reason if condition is not None else "",
        since=condition.last_transition_time if condition is not None else None,
        gpus=gpu_holdings(node.annotations.get(OBSERVED_ANNOTATION)),
        advertised=advertised(node),
        last_error=" ".join(node.annotations.get(LAST_ERROR_ANNOTATION, "").split()),
    )
