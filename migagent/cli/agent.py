"""`migagent agent`: the Kubernetes node agent (a drop-in for k8s-mig-manager): its flags.

Flags mirror nvidia-mig-manager where one exists (NODE_NAME, CONFIG_FILE, KUBECONFIG). The agent
applies the layout named by its Node's `nvidia.com/mig.config` label from the mounted layout file,
draining only the pods whose MIG devices change; see migagent.attempt.reconcile_node.
The flags resolve to `migagent.wiring.AgentOptions`; `migagent.wiring.build_agent` assembles the agent
(shared with the simulator's `migagent demo`, which runs the same wiring).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from migagent.attempt.gate import GateSettings
from migagent.attempt.listener import MetricsListener, NullListener
from migagent.attempt.ports import AgentSettings
from migagent.cli.commands import summary
from migagent.cli.node import (
    DEFAULT_JOURNAL_DIR,
    add_node_arguments,
    add_reboot_arguments,
    journal_for,
    open_node,
    reboot_requester_for,
)
from migagent.cli.operator import add_operator_arguments, post_change_from_args, wait_for_operator
from migagent.cli.signals import CtrlC, signals_handled
from migagent.clock import SystemClock
from migagent.errors import UsageError
from migagent.kube.adapter import KubeApi
from migagent.kube.client import make_api_client
from migagent.kube.timeouts import DEFAULT_REQUEST_TIMEOUT_S
from migagent.layout.sharing import SharingConfigError
from migagent.layout.strategy import MIG_STRATEGIES, MigStrategy
from migagent.loops.unable import reported_if_unable
from migagent.node.dra import DRA_NAMESPACE, DRA_PLUGIN_SELECTOR
from migagent.node.names import DEFAULT_OPERATOR_NAMESPACE, DEVICE_PLUGIN_SELECTOR, ConditionReason
from migagent.node.owners import CLUSTER_POLICY_NAME
from migagent.node.sharing_source import SharingSettings
from migagent.plumbing.health import DEFAULT_STALE_AFTER_S, HealthState
from migagent.plumbing.serve import start_observability
from migagent.podresources.client import DEFAULT_SOCKET_PATH
from migagent.reconcile.retry import RetryPolicy
from migagent.sources.node_label import WatchSettings
from migagent.wiring import RESTART_STRATEGIES, AgentOptions, build_agent

# Kubernetes' own libraries log every retried connection at WARNING; our structured logs say it once.
_NOISY_LOGGERS = ("urllib3.connectionpool", "kubernetes.client.rest")
STRATEGY_AUTO = "auto"


# -- the command ----------------------------------------------------------------------------------


def _positive(args: argparse.Namespace, *names: str) -> None:
    for name in names:
        if getattr(args, name) <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive number of seconds")


def _options(args: argparse.Namespace) -> AgentOptions:
    if not args.node_name:
        raise UsageError("the node name is required: set NODE_NAME (downward API) or pass --node-name")
    if not args.config_file:
        raise UsageError("the layout file is required: pass --config-file (env CONFIG_FILE)")
    _positive(
        args, "drain_timeout", "readvertise_timeout", "resync_period", "retry_initial", "retry_max",
        "request_timeout", "liveness_timeout",
    )
    if args.device_plugin_settle < 0:
        raise UsageError("--device-plugin-settle must be zero or a positive number of seconds")
    if args.advertisement_stable < 0:
        raise UsageError("--advertisement-stable must be zero or a positive number of seconds")
    try:
        sharing = SharingSettings(
            config_file=Path(args.device_plugin_config_file) if args.device_plugin_config_file else None,
            config_map=args.device_plugin_config_map or None,
            default_config=args.device_plugin_config_default or None,
        )
    except SharingConfigError as exc:
        raise UsageError(str(exc)) from exc
    if args.lease_duration < 0:
        raise UsageError("--lease-duration must be zero (no Lease) or a positive number of seconds")
    auto = args.mig_strategy == STRATEGY_AUTO
    settings = AgentSettings(
        config_file=Path(args.config_file),
        drain_timeout_s=args.drain_timeout,
        readvertise_timeout_s=args.readvertise_timeout,
        plugin_settle_s=args.device_plugin_settle,
        mig_strategy=MigStrategy.MIXED if auto else MigStrategy(args.mig_strategy),
        mig_strategy_auto=auto,
        gate=GateSettings(
            proc_root=Path(args.proc_root) if args.proc_root else None,
            delete_emptydir_data=args.delete_emptydir_data,
        ),
        sharing=sharing,
        advertisement_stable_s=args.advertisement_stable,
        device_plugin=not args.no_device_plugin,
        force_delete=args.force_delete,
        resync_period_s=args.resync_period,
        retry=RetryPolicy(
            failure_backoff_initial=args.retry_initial, failure_backoff_max=max(args.retry_initial, args.retry_max)
        ),
    )
    return AgentOptions(
        node_name=args.node_name,
        settings=settings,
        podresources_socket=args.podresources_socket,
        restart=args.device_plugin_restart,
        operator_namespace=args.operator_namespace,
        plugin_selector=args.device_plugin_selector,
        plugin_daemonset=args.device_plugin_daemonset,
        watch=WatchSettings(resync_period_s=args.resync_period, request_timeout_s=args.request_timeout),
        request_timeout_s=args.request_timeout,
        dra=args.dra_driver,
        dra_namespace=args.dra_namespace,
        dra_selector=args.dra_selector,
        lease_namespace=args.lease_namespace,
        lease_duration_s=args.lease_duration,
        cluster_policy=_cluster_policy(args),
    )


def _cluster_policy(args: argparse.Namespace) -> str | None:
    """The ClusterPolicy to read: --cluster-policy, else the operator's default name with the gpu-operator restart."""
    if args.cluster_policy is not None:
        return args.cluster_policy or None
    return CLUSTER_POLICY_NAME if args.device_plugin_restart == "gpu-operator" else None


def add_metrics_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-port", type=int, default=None, help="serve /metrics, /healthz and /readyz on this port (0: any)"
    )
    parser.add_argument("--metrics-address", default="0.0.0.0", help="address for --metrics-port")


def observability_from_args(
    args: argparse.Namespace, health: HealthState
) -> tuple[MetricsListener, Callable[[], None], str | None]:
    """The metrics listener, the callable that stops the server, and its URL (None when not serving)."""
    if args.metrics_port is None:
        return NullListener(), lambda: None, None
    metrics, server = start_observability(args.metrics_port, args.metrics_address, health)
    return metrics, server.stop, server.url


def _run_agent(args: argparse.Namespace) -> int:
    options = _options(args)
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    clock = SystemClock()
    health = HealthState(clock, stale_after_s=args.liveness_timeout)
    api = KubeApi(
        make_api_client(kubeconfig=args.kubeconfig, api_server=args.api_server),
        node_name=options.node_name,
        clock=clock,
        timeout=options.request_timeout,
    )
    listener, stop_observability, _url = observability_from_args(args, health)
    stop = threading.Event()
    ctrl_c = CtrlC(stop.set)
    try:
        with signals_handled({signal.SIGTERM: stop.set, signal.SIGINT: ctrl_c}):
            wait_for_operator(args, api=api, clock=clock, stop=stop)
        with ExitStack() as node_stack:
            with reported_if_unable(api, ConditionReason.NVML_UNAVAILABLE, "cannot initialise NVML"):
                driver = node_stack.enter_context(open_node(args, held=False))
                # The agent holds NVML only while it works, so prove now, once, that it can be opened:
                # an agent that never could would otherwise leave the Node saying `success`.
                with driver.session():
                    pass
            agent, source = build_agent(
                options, api=api, driver=driver, journal=journal_for(args), clock=clock,
                reboot_requester=reboot_requester_for(args), listener=listener, health=health,
                post_change=post_change_from_args(args, api),
            )
            source.start()
            try:
                with signals_handled({signal.SIGTERM: stop.set, signal.SIGINT: ctrl_c}):
                    agent.run(stop)
            finally:
                source.stop()
    finally:
        stop_observability()
    return ctrl_c.exit_code()


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("agent", help=summary("agent"))
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
    parser.add_argument(
        "--lease-namespace", default=env("POD_NAMESPACE", "migagent"),
        help="namespace of the node's Lease migagent-node-<node> (env POD_NAMESPACE; default migagent)",
    )
    parser.add_argument(
        "--lease-duration", type=int, default=30, metavar="SECONDS",
        help="one agent per node: a Lease not renewed for this long may be taken by another agent (0: no Lease)",
    )
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
        "--advertisement-stable", type=float, default=30.0, metavar="SECONDS",
        help="when the sharing config cannot be known (the node selects a config the agent cannot read), accept"
        " an advertisement that has held still this long instead of an exact count (default 30)",
    )
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
    parser.add_argument(
        "--drain-timeout", type=float, default=300.0, metavar="SECONDS",
        help="give up (and undo) when pods on changing devices have not left by then, e.g. held by a PDB",
    )
    parser.add_argument(
        "--readvertise-timeout", type=float, default=300.0, metavar="SECONDS",
        help="how long the device plugin may take to advertise the new MIG devices in Node allocatable",
    )
    parser.add_argument(
        "--device-plugin-settle", type=float, default=60.0, metavar="SECONDS",
        help="when the GPUs already match but Node allocatable does not yet (a device plugin still starting),"
        " wait this long before cordoning the node and restarting the plugin",
    )
    parser.add_argument(
        "--force-delete", action="store_true", help="delete pods instead of evicting them (ignores PDBs)"
    )
    parser.add_argument(
        "--resync-period", type=float, default=300.0, metavar="SECONDS",
        help="re-check the node this often even without a label change (drift repair)",
    )
    parser.add_argument(
        "--retry-initial", type=float, default=30.0, metavar="SECONDS",
        help="first retry delay of a failed node, doubled per failure up to --retry-max",
    )
    parser.add_argument(
        "--retry-max", type=float, default=1800.0, metavar="SECONDS",
        help="longest retry delay of a failed or refused node (default 30 min); a refusal is re-checked"
        " without touching the node",
    )
    parser.add_argument(
        "--request-timeout", type=float, default=DEFAULT_REQUEST_TIMEOUT_S, metavar="SECONDS",
        help="bound on every API server request, a watch read included (default 30)",
    )
    parser.add_argument(
        "--liveness-timeout", type=float, default=DEFAULT_STALE_AFTER_S, metavar="SECONDS",
        help="/healthz fails when the agent has reached no safe point for this long (a stuck reconcile)",
    )
    add_reboot_arguments(parser)
    add_operator_arguments(parser)
    add_metrics_arguments(parser)
    add_node_arguments(parser)
    parser.set_defaults(handler=_run_agent, log_level=logging.INFO)
