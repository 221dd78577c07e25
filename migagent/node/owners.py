"""Who else might manage MIG on this node, and what the GPU Operator says the MIG strategy is.

Read before any write, so a node another MIG manager owns is refused untouched:
- NVIDIA's k8s-mig-manager: its pod (label `app=nvidia-mig-manager`, as the GPU Operator and its
  Helm chart label it) scheduled on this node; or the operator's `nvidia.com/gpu.deploy.mig-manager=true`
  node label while the ClusterPolicy has `migManager.enabled` (the operator sets that label on every
  MIG-capable node whether or not mig-manager is enabled, so the label alone proves nothing).
- The DRA driver for NVIDIA GPUs with its `DynamicMIG` feature gate: it creates and destroys MIG
  devices itself and destroys at start any it did not create. It publishes, in ResourceSlices of
  driver `gpu.nvidia.com` for this node, MIG devices that do not exist yet: they consume the GPU's
  shared counters (KEP-4815 partitionable devices) and carry no `uuid` attribute
  (https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/blob/main/docs/guides/gpu-allocation/mig.md).
  Static MIG devices carry the `uuid` of a MIG device that exists and are no conflict.

ResourceSlices and the ClusterPolicy are read as plain JSON (CustomObjectsApi), so an API server
without them (no DRA, no operator) is simply "none", as is a 403 where RBAC grants no read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from migagent.layout.strategy import MigStrategy
from migagent.node.names import deploy_label

JsonDict = dict[str, Any]

MIG_MANAGER_SELECTOR = "app=nvidia-mig-manager"
MIG_MANAGER_LABEL = deploy_label("mig-manager")
DRA_GPU_DRIVER = "gpu.nvidia.com"
CLUSTER_POLICY_NAME = "cluster-policy"
"""The name the GPU Operator's Helm chart gives its one ClusterPolicy."""


def _path(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _attribute(device: JsonDict, name: str) -> Any:
    attributes = device.get("attributes") or {}
    value = attributes.get(name, attributes.get(f"{DRA_GPU_DRIVER}/{name}"))
    if isinstance(value, dict):
        return next(iter(value.values()), None)  # {"string": "mig"} / {"int": 3} / {"version": ...}
    return value


def dynamic_mig_devices(slices: Sequence[JsonDict]) -> list[str]:
    """Names of MIG devices advertised dynamically (they do not exist yet): DynamicMIG is on."""
    found: list[str] = []
    for item in slices:
        for device in _path(item, "spec", "devices") or []:
            if not isinstance(device, dict) or _attribute(device, "type") != "mig":
                continue
            if device.get("consumesCounters") or not _attribute(device, "uuid"):
                found.append(str(device.get("name", "?")))
    return found


def mig_manager_enabled(policy: JsonDict | None) -> bool | None:
    """The ClusterPolicy's `migManager.enabled` (None: no ClusterPolicy, or it does not say)."""
    enabled = _path(policy, "spec", "migManager", "enabled")
    return enabled if isinstance(enabled, bool) else None


def strategy_of_policy(policy: JsonDict | None) -> MigStrategy | None:
    """The ClusterPolicy's `mig.strategy` (the operator's device plugin and GFD use it)."""
    value = _path(policy, "spec", "mig", "strategy")
    try:
        return MigStrategy(value) if isinstance(value, str) else None
    except ValueError:
        return None


def mig_manager_labelled(labels: Mapping[str, str]) -> bool:
    return labels.get(MIG_MANAGER_LABEL) == "true"
