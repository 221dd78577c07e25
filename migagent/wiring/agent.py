"""From the agent's resolved options to its running parts: the one place the agent is assembled.

`build_agent` turns frozen `AgentOptions` (what the flags resolved to) and the live adapters (the
Kubernetes API, the node's GPUs, the journal, the clock) into an `Agent` and its label source. The
CLI (`migagent agent`), the simulator's cluster and `migagent demo`, the tests and the bench all build
the agent here, so they run the same wiring. No argparse here: `cli/` owns flags.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field

from migagent.attempt.advertise.expectation import ExpectedAdvertisement
from migagent.attempt.advertise.sharing_source import SharingSource
from migagent.attempt.drain.drainer import Drainer
from migagent.attempt.listener import MetricsListener, NullListener
from migagent.attempt.ports import AgentPorts, AgentSettings, PhaseHook
from migagent.attempt.preflight import Preflight
from migagent.attempt.window.deviceplugin import (
    AlsoRestart,
    DeletePod,
    DevicePluginRestarter,
    GpuOperatorPause,
    NoRestart,
)
from migagent.attempt.window.post_change import PostChangeSteps
from migagent.clock import Clock
from migagent.errors import UsageError
from migagent.kube.adapter import KubeApi
from migagent.kube.timeouts import DEFAULT_REQUEST_TIMEOUT_S, RequestTimeout
from migagent.loops.ownership import NodeOwnership, OwnedAgent
from migagent.node.dra import DRA_DRIVER, DRA_NAMESPACE, DRA_PLUGIN_SELECTOR, DraSlices
from migagent.node.names import DEFAULT_OPERATOR_NAMESPACE, DEVICE_PLUGIN_CONFIG_LABEL, DEVICE_PLUGIN_SELECTOR
from migagent.plumbing.health import HealthState
from migagent.podresources.client import DEFAULT_SOCKET_PATH, PodResourcesClient
from migagent.reconcile.journal import FileJournal, Journal
from migagent.reconcile.machine import ApplyEngine
from migagent.reconcile.ports import NodeDriver, RebootRequester
from migagent.reconcile.statelock import StateLock
from migagent.sources.node_label import NodeLabelSource, WatchSettings

RESTART_STRATEGIES = ("gpu-operator", "node-label", "delete-pod", "none")
DEVICE_PLUGIN = "device-plugin"


@dataclass(frozen=True)
class AgentOptions:
    """Everything `build_agent` needs besides the live objects: what the flags resolve to."""

    node_name: str
    settings: AgentSettings
    podresources_socket: str = DEFAULT_SOCKET_PATH
    restart: str = "gpu-operator"
    operator_namespace: str = DEFAULT_OPERATOR_NAMESPACE
    plugin_selector: str = DEVICE_PLUGIN_SELECTOR
    plugin_daemonset: str | None = None
    """Only pods of the DaemonSet of this name are the plugin's (the upstream chart labels GFD and
    the MPS daemon like the plugin)."""
    plugin_timeout_s: float = 300.0
    poll_interval_s: float = 1.0
    """How often pod departures, plugin pods and Node allocatable are re-read while waiting."""
    watch: WatchSettings = field(default_factory=WatchSettings)
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    """Every API request's bound (the KubeApi the caller builds should use `request_timeout`)."""
    dra: bool = False
    """NVIDIA's DRA driver serves the node: restart its kubelet plugin after a change and wait for its
    ResourceSlices to list the new MIG devices."""
    dra_namespace: str = DRA_NAMESPACE
    dra_selector: str = DRA_PLUGIN_SELECTOR
    dra_driver: str = DRA_DRIVER
    lease_namespace: str = "migagent"
    """Where the node's Lease `migagent-node-<node>` lives (the agent's own namespace)."""
    lease_duration_s: int = 30
    """How long a Lease not renewed stays another agent's; 0: no Lease (the state lock still holds)."""
    holder_identity: str | None = None
    """Who this agent is in the Lease (None: $POD_NAME, else the host name plus a random suffix)."""
    cluster_policy: str | None = None
    """The GPU Operator's ClusterPolicy to read (MIG strategy, mig-manager enabled); None: none."""

    @property
    def request_timeout(self) -> RequestTimeout:
        return RequestTimeout(self.request_timeout_s)


def _restarter(options: AgentOptions, api: KubeApi, clock: Clock) -> DevicePluginRestarter:
    restarter = _plugin_restarter(options, api, clock)
    if not options.dra:
        return restarter
    dra_plugin = DeletePod(
        api,
        clock=clock,
        namespace=options.dra_namespace,
        label_selector=options.dra_selector,
        timeout_s=options.plugin_timeout_s,
        poll_interval_s=options.poll_interval_s,
    )
    return AlsoRestart(restarter, dra_plugin)


def _advertisement(options: AgentOptions, api: KubeApi) -> ExpectedAdvertisement:
    settings = options.settings
    dra = DraSlices(api, node_name=options.node_name, driver=options.dra_driver) if options.dra else None
    return ExpectedAdvertisement(
        api,
        strategy=settings.mig_strategy,
        sharing=SharingSource(settings.sharing, reader=api),
        stable_s=settings.advertisement_stable_s,
        probe=dra.probe if dra is not None else None,
        device_plugin=settings.device_plugin,
    )


def _plugin_restarter(options: AgentOptions, api: KubeApi, clock: Clock) -> DevicePluginRestarter:
    if options.restart == "gpu-operator":
        return GpuOperatorPause(
            api,
            clock=clock,
            namespace=options.operator_namespace,
            timeout_s=options.plugin_timeout_s,
            poll_interval_s=options.poll_interval_s,
        )
    if options.restart == "node-label":
        return GpuOperatorPause(
            api,
            clock=clock,
            components=(DEVICE_PLUGIN,),
            namespace=options.operator_namespace,
            timeout_s=options.plugin_timeout_s,
            poll_interval_s=options.poll_interval_s,
            pod_selectors={DEVICE_PLUGIN: options.plugin_selector},
            pause_absent=True,
            owner_name=options.plugin_daemonset,
        )
    if options.restart == "delete-pod":
        return DeletePod(
            api,
            clock=clock,
            namespace=options.operator_namespace,
            label_selector=options.plugin_selector,
            timeout_s=options.plugin_timeout_s,
            poll_interval_s=options.poll_interval_s,
            owner_name=options.plugin_daemonset,
        )
    if options.restart == "none":
        return NoRestart()
    raise UsageError(
        f"--device-plugin-restart {options.restart!r} is not valid; valid: {', '.join(RESTART_STRATEGIES)}"
    )


def build_agent(
    options: AgentOptions,
    *,
    api: KubeApi,
    driver: NodeDriver,
    journal: Journal,
    clock: Clock,
    reboot_requester: RebootRequester | None = None,
    listener: MetricsListener | None = None,
    health: HealthState | None = None,
    phase_hook: PhaseHook | None = None,
    post_change: PostChangeSteps | None = None,
) -> tuple[OwnedAgent, NodeLabelSource]:
    """The agent and its label source (not started: `source.start()` before `agent.run`)."""
    # A new device plugin config on the node (its config manager restarts the plugin) changes what
    # to expect, not the GPUs: the agent re-checks at once, with no cordon when the plugin catches up.
    source = NodeLabelSource(api, clock=clock, settings=options.watch, also_wake_on=(DEVICE_PLUGIN_CONFIG_LABEL,))
    ports = AgentPorts(
        api=api,
        driver=driver,
        engine=ApplyEngine(
            driver,
            journal,
            clock=clock,
            allow_reboot=reboot_requester is not None,
            reboot_requester=reboot_requester,
            retry=options.settings.retry,  # one policy: the engine and the agent retry on the same schedule
        ),
        pod_resources=PodResourcesClient(options.podresources_socket),
        restarter=_restarter(options, api, clock),
        drainer=Drainer(
            api,
            clock=clock,
            retry_initial_s=min(1.0, options.poll_interval_s),
            retry_max_s=max(5.0 * options.poll_interval_s, 0.05),
            poll_interval_s=options.poll_interval_s,
        ),
        clock=clock,
        advertisement=_advertisement(options, api),
        listener=listener or NullListener(),
        post_change=post_change,
        node_updates=source,
        preflight=Preflight(
            api,
            api.owner_reads(cluster_policy=options.cluster_policy),
            sharing=SharingSource(options.settings.sharing, reader=api),
        ),
    )
    if health is not None:
        health.add_liveness_check(source.stuck)
        health.add_readiness_check(source.failing)
    agent = OwnedAgent(
        ports,
        options.settings,
        source=source,
        health=health,
        phase_hook=phase_hook,
        current_label=lambda: source.desired,
        ownership=_ownership(options, api, journal, clock),
    )
    return agent, source


def _ownership(options: AgentOptions, api: KubeApi, journal: Journal, clock: Clock) -> NodeOwnership:
    """The state lock on the journal's directory (shared with host mode and `apply`) and the node's Lease."""
    lock = StateLock(journal.directory, command="migagent agent") if isinstance(journal, FileJournal) else None
    # The pod's name is stable across container restarts (a restarted agent takes its Lease back at
    # once); elsewhere (host, tests) every process is a holder of its own.
    identity = options.holder_identity or os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    lease = (
        api.node_lease(namespace=options.lease_namespace, identity=identity, duration_s=options.lease_duration_s)
        if options.lease_duration_s > 0
        else None
    )
    return NodeOwnership(lock=lock, lease=lease, clock=clock)
