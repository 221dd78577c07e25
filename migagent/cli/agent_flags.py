"""`migagent agent`'s flags, in the groups an admin looks for them (`migagent agent --help` lists
them in this order). `cli.agent` registers them and turns them into `wiring.AgentOptions`.
"""

from __future__ import annotations

import argparse
import os

from migagent.cli.node import DEFAULT_JOURNAL_DIR
from migagent.cli.values import POSITIVE_SECONDS, SECONDS, WHOLE_SECONDS
from migagent.kube.timeouts import DEFAULT_REQUEST_TIMEOUT_S
from migagent.layout.strategy import MIG_STRATEGIES, MigStrategy
from migagent.node.dra import DRA_NAMESPACE, DRA_PLUGIN_SELECTOR
from migagent.node.names import DEFAULT_OPERATOR_NAMESPACE, DEVICE_PLUGIN_SELECTOR
from migagent.node.owners import CLUSTER_POLICY_NAME
from migagent.plumbing.health import DEFAULT_STALE_AFTER_S
from migagent.podresources.client import DEFAULT_SOCKET_PATH
from migagent.wiring import RESTART_STRATEGIES

STRATEGY_AUTO = "auto"
"""`--mig-strategy auto`: read the strategy from the ClusterPolicy or what the plugin advertises."""


def add_where_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the agent finds its node, its layouts, its journal, the API server and the kubelet."""
    env = os.environ.get
    parser.add_argument("-n", "--node-name", default=env("NODE_NAME"), help="this node's name (env NODE_NAME)")
    parser.add_argument(
        "-f", "--config-file", default=env("CONFIG_FILE") or env("MIG_PARTED_CONFIG_FILE"),
        help="layout file in mig-parted v1 format, usually a mounted ConfigMap; re-read at every reconcile"
        " (env CONFIG_FILE)",
    )
    parser.add_argument(
        "--journal-dir", default=env("MIGAGENT_JOURNAL_DIR"),
        help=f"apply journal directory, on a hostPath (env MIGAGENT_JOURNAL_DIR; default {DEFAULT_JOURNAL_DIR})",
    )
    parser.add_argument("--kubeconfig", default=env("KUBECONFIG"), help="kubeconfig file (default: in-cluster)")
    parser.add_argument("--api-server", help="API server URL, e.g. the simulator's http://127.0.0.1:PORT")
    parser.add_argument(
        "--podresources-socket", default=env("MIGAGENT_PODRESOURCES_SOCKET", DEFAULT_SOCKET_PATH),
        help=f"kubelet PodResources socket (default {DEFAULT_SOCKET_PATH})",
    )


def add_device_plugin_arguments(parser: argparse.ArgumentParser) -> None:
    """How the device plugin is restarted, and which MIG strategy it advertises by."""
    env = os.environ.get
    parser.add_argument(
        "--device-plugin-restart", choices=RESTART_STRATEGIES, default="gpu-operator",
        help="gpu-operator: pause the operator's nvidia.com/gpu.deploy.* labels (default); node-label: the same"
        " with nvidia.com/gpu.deploy.device-plugin for a standalone plugin whose DaemonSet avoids paused nodes;"
        " delete-pod: delete the plugin pod for its DaemonSet to recreate; none: something else restarts it",
    )
    parser.add_argument(
        "--operator-namespace", default=env("OPERATOR_NAMESPACE", DEFAULT_OPERATOR_NAMESPACE),
        help=f"namespace of the device plugin and GPU Operator pods (default {DEFAULT_OPERATOR_NAMESPACE})",
    )
    parser.add_argument(
        "--device-plugin-selector", default=DEVICE_PLUGIN_SELECTOR,
        help="plugin pod labels, for node-label and delete-pod",
    )
    parser.add_argument(
        "--device-plugin-daemonset", metavar="NAME",
        help="count only pods of the DaemonSet of this name as the plugin's (the upstream chart gives GPU Feature"
        " Discovery and the MPS daemon the plugin's labels)",
    )
    parser.add_argument(
        "--mig-strategy", choices=(*MIG_STRATEGIES, STRATEGY_AUTO),
        default=env("MIG_STRATEGY", MigStrategy.MIXED.value),
        help="the device plugin's MIG strategy (GPU Operator mig.strategy): mixed expects nvidia.com/mig-<profile>;"
        " single expects nvidia.com/gpu per MIG device and refuses layouts mixing profiles; none expects whole"
        " GPUs; auto reads it from the ClusterPolicy or from what the plugin advertises (env MIG_STRATEGY;"
        " default mixed). An explicit strategy the plugin contradicts is refused as StrategyMismatch",
    )
    parser.add_argument(
        "--cluster-policy", default=env("CLUSTER_POLICY"), metavar="NAME",
        help=f"the GPU Operator ClusterPolicy to read (strategy, mig-manager enabled); default {CLUSTER_POLICY_NAME}"
        " with --device-plugin-restart=gpu-operator, else none; '' never reads one",
    )


def add_lease_arguments(parser: argparse.ArgumentParser) -> None:
    """One agent per node: the node's Lease."""
    env = os.environ.get
    parser.add_argument(
        "--lease-namespace", default=env("POD_NAMESPACE", "migagent"),
        help="namespace of the node's Lease migagent-node-<node> (env POD_NAMESPACE; default migagent)",
    )
    parser.add_argument(
        "--lease-duration", type=WHOLE_SECONDS, default=30, metavar="SECONDS",
        help="one agent per node: a Lease not renewed for this long may be taken by another agent (0: no Lease)",
    )


def add_gate_arguments(parser: argparse.ArgumentParser) -> None:
    """What the safety gate may allow and see."""
    env = os.environ.get
    parser.add_argument(
        "--delete-emptydir-data", action="store_true",
        help="evict pods with emptyDir volumes (their data is lost), as kubectl drain; otherwise they are refused",
    )
    parser.add_argument(
        "--proc-root", default=env("MIGAGENT_PROC_ROOT", ""), metavar="DIR",
        help="with hostPID, /proc: the safety gate maps a process on a GPU instance to its pod by its cgroup, or"
        " names it by pid and command (default: not looked up, since without hostPID a pid NVML reports may"
        " name another process in the agent's own pid namespace)",
    )


def add_sharing_arguments(parser: argparse.ArgumentParser) -> None:
    """The device plugin's sharing config (time-slicing), which decides the counts allocatable must show."""
    env = os.environ.get
    parser.add_argument(
        "--device-plugin-config-map", metavar="NAMESPACE/NAME", default=env("DEVICE_PLUGIN_CONFIG_MAP"),
        help="the device plugin's ConfigMap (GPU Operator ClusterPolicy devicePlugin.config.name in the operator"
        " namespace; plugin chart config.name): its sharing config (time-slicing replicas, renames) decides the"
        " counts Node allocatable must show; the node label nvidia.com/device-plugin.config picks the key"
        " (env DEVICE_PLUGIN_CONFIG_MAP)",
    )
    parser.add_argument(
        "--device-plugin-config-default", metavar="KEY", default=env("DEVICE_PLUGIN_CONFIG_DEFAULT"),
        help="the config used on nodes without the nvidia.com/device-plugin.config label (ClusterPolicy"
        " devicePlugin.config.default; chart config.default; env DEVICE_PLUGIN_CONFIG_DEFAULT)",
    )
    parser.add_argument(
        "--device-plugin-config-file", metavar="PATH", default=env("DEVICE_PLUGIN_CONFIG_FILE"),
        help="the plugin's config file, or a directory of them named by config key, where the ConfigMap cannot"
        " be read (wins over --device-plugin-config-map). Without either, GPU Feature Discovery's"
        " nvidia.com/<resource>.replicas labels are used when present (env DEVICE_PLUGIN_CONFIG_FILE)",
    )
    parser.add_argument(
        "--advertisement-stable", type=SECONDS, default=30.0, metavar="SECONDS",
        help="when the sharing config cannot be known (the node selects a config the agent cannot read), accept"
        " an advertisement that has held still this long instead of an exact count (default 30)",
    )


def add_dra_arguments(parser: argparse.ArgumentParser) -> None:
    """NVIDIA's DRA driver in place of, or beside, the device plugin."""
    parser.add_argument(
        "--dra-driver", action="store_true",
        help="NVIDIA's DRA driver (gpu.nvidia.com) serves this node with static MIG devices: restart its kubelet"
        " plugin after a change and wait until its ResourceSlices list the new MIG devices (needs list on"
        " resourceslices and delete on pods in --dra-namespace: deploy/components/dra-driver)",
    )
    parser.add_argument(
        "--dra-namespace", default=DRA_NAMESPACE, help=f"the DRA driver's namespace (default {DRA_NAMESPACE})"
    )
    parser.add_argument(
        "--dra-selector", default=DRA_PLUGIN_SELECTOR,
        help=f"labels of the DRA driver's kubelet plugin pods (default {DRA_PLUGIN_SELECTOR})",
    )
    parser.add_argument(
        "--no-device-plugin", action="store_true",
        help="no NVIDIA device plugin runs on the node (the DRA driver serves it): expect nothing in Node allocatable",
    )


def add_change_arguments(parser: argparse.ArgumentParser) -> None:
    """How long a change may take, how pods leave, and when a failed node is retried."""
    parser.add_argument(
        "--drain-timeout", type=POSITIVE_SECONDS, default=300.0, metavar="SECONDS",
        help="give up (and undo) when pods on changing devices have not left by then, e.g. held by a PDB",
    )
    parser.add_argument(
        "--readvertise-timeout", type=POSITIVE_SECONDS, default=300.0, metavar="SECONDS",
        help="how long the device plugin may take to advertise the new MIG devices in Node allocatable",
    )
    parser.add_argument(
        "--device-plugin-settle", type=SECONDS, default=60.0, metavar="SECONDS",
        help="when the GPUs already match but Node allocatable does not yet (a device plugin still starting),"
        " wait this long before cordoning the node and restarting the plugin",
    )
    parser.add_argument(
        "--force-delete", action="store_true", help="delete pods instead of evicting them (ignores PDBs)"
    )
    parser.add_argument(
        "--resync-period", type=POSITIVE_SECONDS, default=300.0, metavar="SECONDS",
        help="re-check the node this often even without a label change (drift repair)",
    )
    parser.add_argument(
        "--retry-initial", type=POSITIVE_SECONDS, default=30.0, metavar="SECONDS",
        help="first retry delay of a failed node, doubled per failure up to --retry-max",
    )
    parser.add_argument(
        "--retry-max", type=POSITIVE_SECONDS, default=1800.0, metavar="SECONDS",
        help="longest retry delay of a failed or refused node (default 30 min); a refusal is re-checked"
        " without touching the node",
    )
    parser.add_argument(
        "--request-timeout", type=POSITIVE_SECONDS, default=DEFAULT_REQUEST_TIMEOUT_S, metavar="SECONDS",
        help="bound on every API server request, a watch read included (default 30)",
    )
    parser.add_argument(
        "--liveness-timeout", type=POSITIVE_SECONDS, default=DEFAULT_STALE_AFTER_S, metavar="SECONDS",
        help="/healthz fails when the agent has reached no safe point for this long (a stuck reconcile)",
    )
