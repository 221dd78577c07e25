"""Every Kubernetes name users see: labels, annotations, the condition, event reasons, resource names.

The `nvidia.com/...` labels follow the GPU Operator / k8s-mig-manager contract
(reference/mig-parted-contract.md §3.2), so migagent is a drop-in for it; our own detail lives
under the `migagent.io/` prefix.
"""

from __future__ import annotations

import enum
from types import MappingProxyType

from migagent.layout import strategy as _strategy

# --- GPU Operator compatible labels -------------------------------------------------------------

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
"""The desired layout name (a key of the mig-parted config file)."""

MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"


class MigConfigState(enum.StrEnum):
    """Values of `nvidia.com/mig.config.state`."""

    PENDING = "pending"
    REBOOTING = "rebooting"
    SUCCESS = "success"
    FAILED = "failed"


DEPLOY_LABEL_PREFIX = "nvidia.com/gpu.deploy."
PAUSED_FOR_MIG_CHANGE = "paused-for-mig-change"
DEPLOY_TRUE = "true"
DEPLOY_FALSE = "false"

GPU_OPERATOR_COMPONENTS: tuple[str, ...] = (
    "device-plugin",
    "gpu-feature-discovery",
    "dcgm-exporter",
    "dcgm",
    "nvsm",
    "client",
)
"""Components whose deploy label is paused during a change (each only if its label is present)."""

COMPONENT_POD_SELECTORS: MappingProxyType[str, str] = MappingProxyType(
    {
        "device-plugin": "app=nvidia-device-plugin-daemonset",
        "gpu-feature-discovery": "app=gpu-feature-discovery",
        "dcgm-exporter": "app=nvidia-dcgm-exporter",
        "dcgm": "app=nvidia-dcgm",
    }
)
"""Pod label selectors, in the operator namespace, of the components that hold GPU handles."""

DEFAULT_OPERATOR_NAMESPACE = "gpu-operator"
DEVICE_PLUGIN_SELECTOR = COMPONENT_POD_SELECTORS["device-plugin"]


def deploy_label(component: str) -> str:
    return f"{DEPLOY_LABEL_PREFIX}{component}"


# --- migagent's own annotations and condition ---------------------------------------------------

PREFIX = "migagent.io/"
DESIRED_ANNOTATION = f"{PREFIX}desired"
OBSERVED_ANNOTATION = f"{PREFIX}observed"
PLAN_ANNOTATION = f"{PREFIX}plan"
LAST_ERROR_ANNOTATION = f"{PREFIX}last-error"
ATTEMPT_ANNOTATION = f"{PREFIX}attempt"
CORDONED_BY_MIGAGENT_ANNOTATION = f"{PREFIX}cordoned-by-migagent"
""""true" only while the node is cordoned because migagent cordoned it (never for an admin cordon)."""

CONDITION_TYPE = "MigConfigReady"


class ConditionStatus(enum.StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ConditionReason(enum.StrEnum):
    APPLIED = "Applied"
    RECONFIGURING = "Reconfiguring"
    DRAINING = "Draining"
    WAITING_FOR_DEVICE_PLUGIN = "WaitingForDevicePlugin"
    DRAIN_BLOCKED = "DrainBlocked"
    APPLY_FAILED = "ApplyFailed"
    INVALID_LAYOUT = "InvalidLayout"
    LAYOUT_SELECTS_NO_GPU = "LayoutSelectsNoGpu"
    LAYOUT_DOES_NOT_FIT = "LayoutDoesNotFit"
    REBOOT_REQUIRED = "RebootRequired"
    WAITING_FOR_DRIVER = "WaitingForDriver"
    OTHER_MIG_OWNER = "OtherMigOwner"
    """NVIDIA's mig-manager or a DRA driver with DynamicMIG manages MIG on this node; nothing was touched."""
    STRATEGY_MISMATCH = "StrategyMismatch"
    """--mig-strategy disagrees with what the device plugin advertises; nothing was cordoned."""
    UNKNOWN = "Unknown"


class EventReason(enum.StrEnum):
    """Reasons of the Events migagent records on its Node (CamelCase, as kubectl shows them)."""

    RECONFIGURING = "MigReconfiguring"
    APPLIED = "MigConfigApplied"
    FAILED = "MigConfigFailed"
    DRAINING = "MigDraining"
    POD_EVICTED = "MigPodEvicted"
    DRAIN_BLOCKED = "MigDrainBlocked"
    CORDONED = "MigCordoned"
    UNCORDONED = "MigUncordoned"
    DEVICE_PLUGIN_PAUSED = "MigDevicePluginPaused"
    DEVICE_PLUGIN_RESTARTED = "MigDevicePluginRestarted"
    GPUS_RECONFIGURED = "MigGpusReconfigured"
    WAITING_FOR_DEVICE_PLUGIN = "MigWaitingForDevicePlugin"
    REBOOT_REQUIRED = "MigRebootRequired"


EVENT_NAMESPACE = "default"
"""core/v1 Events about a Node (cluster-scoped) live in `default`."""
EVENT_COMPONENT = "migagent"

# --- resources and well-known pod markers -------------------------------------------------------

GPU_RESOURCE = _strategy.GPU_RESOURCE
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
"""Time-sliced / MPS replicas when the plugin renames shared resources."""
MIG_RESOURCE_PREFIX = _strategy.MIG_RESOURCE_PREFIX
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


def is_gpu_resource(resource: str) -> bool:
    """True for the resources the NVIDIA device plugin advertises (whole GPUs, MIG devices, shared replicas)."""
    return resource in (GPU_RESOURCE, SHARED_GPU_RESOURCE) or resource.startswith(MIG_RESOURCE_PREFIX)
