"""`migagent agent`: the Kubernetes node agent (a drop-in for k8s-mig-manager): from flags to a running agent.

Flags mirror nvidia-mig-manager where one exists (NODE_NAME, CONFIG_FILE, KUBECONFIG). The agent
applies the layout named by its Node's `nvidia.com/mig.config` label from the mounted layout file,
draining only the pods whose MIG devices change; see migagent.attempt.reconcile_node.
The flags resolve to `migagent.wiring.AgentOptions`; `migagent.wiring.build_agent` assembles the agent
(shared with the simulator's `migagent demo`, which runs the same wiring).
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from migagent.attempt.advertise.sharing_source import SharingSettings
from migagent.attempt.drain.gate import GateSettings
from migagent.attempt.listener import MetricsListener, NullListener
from migagent.attempt.ports import AgentSettings
from migagent.cli.agent_flags import (
    STRATEGY_AUTO,
    add_change_arguments,
    add_device_plugin_arguments,
    add_dra_arguments,
    add_gate_arguments,
    add_lease_arguments,
    add_sharing_arguments,
    add_where_arguments,
)
from migagent.cli.commands import summary
from migagent.cli.conflicts import Conflict, Needs, refuse_together
from migagent.cli.node import (
    add_node_arguments,
    add_reboot_arguments,
    journal_for,
    open_node,
    reboot_requester_for,
)
from migagent.cli.operator import add_operator_arguments, post_change_from_args, wait_for_operator
from migagent.cli.signals import CtrlC, signals_handled
from migagent.cli.values import PORT
from migagent.clock import SystemClock
from migagent.errors import UsageError
from migagent.kube.adapter import KubeApi
from migagent.kube.client import make_api_client
from migagent.layout.sharing import SharingConfigError
from migagent.layout.strategy import MigStrategy
from migagent.loops.unable import reported_if_unable
from migagent.node.names import ConditionReason
from migagent.node.owners import CLUSTER_POLICY_NAME
from migagent.plumbing.health import HealthState
from migagent.plumbing.serve import start_observability
from migagent.reconcile.retry import RetryPolicy
from migagent.sources.node_label import WatchSettings
from migagent.wiring import AgentOptions, build_agent

# Kubernetes' own libraries log every retried connection at WARNING; our structured logs say it once.
_NOISY_LOGGERS = ("urllib3.connectionpool", "kubernetes.client.rest")


# -- the command ----------------------------------------------------------------------------------


def _options(args: argparse.Namespace) -> AgentOptions:
    if not args.node_name:
        raise UsageError("the node name is required: set NODE_NAME (downward API) or pass --node-name")
    if not args.config_file:
        raise UsageError("the layout file is required: pass --config-file (env CONFIG_FILE)")
    try:
        sharing = SharingSettings(
            config_file=Path(args.device_plugin_config_file) if args.device_plugin_config_file else None,
            config_map=args.device_plugin_config_map or None,
            default_config=args.device_plugin_config_default or None,
        )
    except SharingConfigError as exc:
        raise UsageError(str(exc)) from exc
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
        "--metrics-port", type=PORT, default=None, help="serve /metrics, /healthz and /readyz on this port (0: any)"
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
    add_where_arguments(parser)
    add_device_plugin_arguments(parser)
    add_lease_arguments(parser)
    add_gate_arguments(parser)
    add_sharing_arguments(parser)
    add_dra_arguments(parser)
    add_change_arguments(parser)
    add_reboot_arguments(parser)
    add_operator_arguments(parser)
    add_metrics_arguments(parser)
    add_node_arguments(parser)
    refuse_together(
        parser,
        Conflict("--no-device-plugin", _PLUGIN_CONFIG_FLAGS, "--no-device-plugin expects nothing in Node allocatable,"
                 " the other says what the device plugin advertises there"),
        Needs("--dra-namespace", "--dra-driver", "the DRA driver's pods are restarted only with --dra-driver"),
        Needs("--dra-selector", "--dra-driver", "the DRA driver's pods are restarted only with --dra-driver"),
    )
    parser.set_defaults(handler=_run_agent, log_level=logging.INFO)


_PLUGIN_CONFIG_FLAGS = ("--device-plugin-config-map", "--device-plugin-config-file", "--device-plugin-config-default")
