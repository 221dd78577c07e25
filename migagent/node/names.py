"""Every Kubernetes name users see: labels, annotations, the condition, event reasons, resource names.

The `nvidia.com/...` labels follow the GPU Operator / k8s-mig-manager contract
(docs/mig-parted.md §6), so migagent is a drop-in for it; our own detail lives
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

DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
"""Which config of its ConfigMap the device plugin (its config-manager sidecar) runs with on this node."""

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
HANDED_OVER_ANNOTATION = f"{PREFIX}handed-over"
"""JSON {layout, attempt, at, open}: an agent stopped mid-change left its cordon and pause for the next one."""
NEXT_RETRY_ANNOTATION = f"{PREFIX}next-retry"
"""JSON {at, label, depends, failures}: a failed attempt's retry time (wall clock) and what it depended on."""

CONDITION_TYPE = "MigConfigReady"


class ConditionStatus(enum.StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ConditionReason(enum.StrEnum):
    """The `MigConfigReady` condition's reason: the one table of reason codes. Each member carries what
    it means (`__doc__`) and the one-line suggested action (`action`) that failure reports append to
    the condition message, the Event and `migagent status`; the README's reason table lists them all."""

    action: str

    def __new__(cls, value: str, doc: str, action: str = "") -> ConditionReason:
        member = str.__new__(cls, value)
        member._value_ = value
        member.__doc__ = doc
        member.action = action
        return member

    APPLIED = "Applied", "The GPUs hold the desired layout and the device plugin advertises it."
    RECONFIGURING = "Reconfiguring", "A change is under way (cordoned, operands paused)."
    DRAINING = "Draining", "Pods on the devices the change removes are being evicted."
    WAITING_FOR_DEVICE_PLUGIN = (
        "WaitingForDevicePlugin",
        "The device plugin did not advertise the new devices in time.",
        "check the device plugin pod on the node (logs, restarts); raise --readvertise-timeout if it is slow",
    )
    DRAIN_BLOCKED = (
        "DrainBlocked",
        "Pods that had to leave the changed devices could not be evicted (PDB, DaemonSet, no controller).",
        "move the named pods or relax their PodDisruptionBudget, or choose a layout that keeps their GPU instances",
    )
    APPLY_FAILED = (
        "ApplyFailed",
        "The change failed for a reason not classified otherwise (NVML, API server, a host step).",
        "read the message and the agent's log; the agent retries with back-off (migagent.io/next-retry)",
    )
    INVALID_LAYOUT = (
        "InvalidLayout",
        "The label names a layout the file lacks, the file is invalid, or the plugin could not advertise it.",
        "fix the nvidia.com/mig.config label or the layout file (migagent validate); nothing was changed for it",
    )
    LAYOUT_SELECTS_NO_GPU = (
        "LayoutSelectsNoGpu",
        "The layout's device selectors match none of this node's GPUs.",
        "check the layout's devices and device-filter against the GPUs named in the message",
    )
    LAYOUT_DOES_NOT_FIT = (
        "LayoutDoesNotFit",
        "A GPU cannot hold the layout (too many instances, a profile it lacks).",
        "choose a layout that fits this GPU model (migagent validate --gpu-model KEY)",
    )
    REBOOT_REQUIRED = (
        "RebootRequired",
        "A MIG mode change needs a GPU reset the platform refuses, so only a reboot activates it.",
        "reboot the node, or allow migagent to (--allow-reboot)",
    )
    DEVICE_PLUGIN_NOT_PAUSED = (
        "DevicePluginNotPaused",
        "A paused component's pod (the device plugin) stayed on the node: its DaemonSet lacks the pause condition.",
        "give the DaemonSet the pause condition (a node selector or affinity on nvidia.com/gpu.deploy.device-plugin;"
        " deploy/README.md), or run the agent with --device-plugin-restart=delete-pod",
    )
    WAITING_FOR_DRIVER = "WaitingForDriver", "The agent waits for the GPU Operator's driver to be ready."
    STORAGE_UNWRITABLE = (
        "StorageUnwritable",
        "The journal (or another file the agent must write) cannot be written; the message names it.",
        "free space or fix the permissions of the named path (the journal directory, /var/lib/migagent)",
    )
    NVML_UNAVAILABLE = (
        "NvmlUnavailable",
        "NVML could not be initialised: the agent cannot see the GPUs, so it changes nothing.",
        "check the driver on the node (nvidia-smi) and that the agent's pod sees the driver library",
    )
    OTHER_MIG_OWNER = (
        "OtherMigOwner",
        "NVIDIA's mig-manager or a DRA driver with DynamicMIG manages MIG on this node; nothing was touched.",
        "turn the other MIG manager off for this node (ClusterPolicy migManager.enabled=false, or the DRA"
        " driver's DynamicMIG), or remove migagent from it",
    )
    STRATEGY_MISMATCH = (
        "StrategyMismatch",
        "--mig-strategy disagrees with what the device plugin advertises; nothing was cordoned.",
        "set --mig-strategy to the plugin's (or auto, which reads the ClusterPolicy or the advertisement)",
    )
    NO_DESIRED_LAYOUT = "NoDesiredLayout", "The node carries no nvidia.com/mig.config label: nothing to apply."
    UNKNOWN = "Unknown", "Not reported yet."


def action_for(reason: str) -> str:
    """The suggested action of a reason code read back from a Node ("" for an unknown or neutral one)."""
    return next((member.action for member in ConditionReason if member.value == reason), "")


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

# --- fleet rollouts (migagent rollout) ----------------------------------------------------------

ROLLOUT_NAMESPACE = "migagent-rollouts"
"""Where rollout state objects live, and nothing else (deploy/components/rollout-controller): so the
rollout controller's Role reaches its own objects and not the layouts."""
LAYOUTS_NAMESPACE = "migagent"
"""Where the agents' layouts ConfigMap lives (deploy/base), which `rollout plan` and `start` read."""
AUTOPILOT_NAMESPACE = "migagent"
"""Where the autopilot keeps its object, reads the layouts and keeps its own rollouts
(deploy/components/autopilot grants it that namespace, not ROLLOUT_NAMESPACE)."""
ROLLOUT_LABEL = f"{PREFIX}rollout"
"""On each rollout's state ConfigMap: the rollout's name (the controller lists by it)."""
ROLLOUT_CONFIGMAP_PREFIX = "migagent-rollout-"
LAYOUTS_CONFIGMAP_PREFIX = "migagent-layouts"
"""deploy/base's configMapGenerator name (kustomize appends a content hash)."""
LAYOUTS_CONFIGMAP_KEY = "mig-layouts.yaml"
