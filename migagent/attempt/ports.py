"""What the agent is built from (the CLI wires real adapters, tests wire the simulator) and its knobs."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from migagent.attempt.advertise.expectation import ExpectedAdvertisement
from migagent.attempt.advertise.sharing_source import SharingSettings
from migagent.attempt.advertise.wait import NodeUpdates
from migagent.attempt.backoff import RetryHold
from migagent.attempt.drain.drainer import Drainer
from migagent.attempt.drain.gate import GateSettings
from migagent.attempt.drain.scope import PodDevicesLister
from migagent.attempt.listener import AgentPhase, MetricsListener, NullListener, Outcome
from migagent.attempt.preflight import Preflight
from migagent.attempt.window.deviceplugin import DevicePluginRestarter
from migagent.attempt.window.post_change import PostChangeSteps
from migagent.clock import Clock
from migagent.layout.observed import Observation
from migagent.layout.strategy import MigStrategy
from migagent.node.port import KubePort
from migagent.reconcile.machine import ApplyEngine
from migagent.reconcile.retry import RetryPolicy

PhaseHook = Callable[[AgentPhase], None]
"""Called as each phase starts; tests use it to stop or kill an agent at a chosen phase."""


@dataclass(frozen=True)
class ReconcileReport:
    outcome: Outcome
    attempt: int = 0
    error: str | None = None
    node_read: bool = True
    hold: RetryHold | None = None
    """FAILED: when to try again and under which conditions; HELD: the hold that still applies."""


class NodeObserver(Protocol):
    def observe(self) -> Observation: ...


class Wake(Protocol):
    @property
    def due(self) -> bool: ...


class DesiredSource(Protocol):
    """Wakes the agent when the desired layout may have changed (sources.node_label.NodeLabelSource)."""

    def wait(self, stop: threading.Event, timeout_s: float) -> Wake: ...


@dataclass(frozen=True)
class AgentPorts:
    api: KubePort
    driver: NodeObserver
    engine: ApplyEngine
    pod_resources: PodDevicesLister
    restarter: DevicePluginRestarter
    drainer: Drainer
    clock: Clock
    advertisement: ExpectedAdvertisement
    """What Node allocatable (and the DRA driver's ResourceSlices) must show for what the GPUs hold."""
    listener: MetricsListener = field(default_factory=NullListener)
    post_change: PostChangeSteps | None = None
    """GPU Operator steps around a change (validators, CDI spec, host GPU clients); None: none."""
    node_updates: NodeUpdates | None = None
    """The agent's watch of its Node: the wait for the new advertisement follows it (None: polls)."""
    preflight: Preflight | None = None
    """Sole-owner and strategy checks before each reconcile (attempt.preflight); None: the agent's
    own Node and pods only (Preflight(api) is built then)."""


@dataclass(frozen=True)
class AgentSettings:
    config_file: Path
    """The mounted layout file (a ConfigMap); read again at every reconcile."""
    drain_timeout_s: float = 300.0
    readvertise_timeout_s: float = 300.0
    readvertise_poll_s: float = 2.0
    plugin_settle_s: float = 60.0
    """When the GPUs already match but Node allocatable does not (a device plugin still starting), how
    long to wait for it before cordoning and restarting the plugin."""
    mig_strategy: MigStrategy = MigStrategy.MIXED
    """The device plugin's MIG strategy: which resources Node allocatable must show, which layouts it refuses."""
    sharing: SharingSettings = field(default_factory=SharingSettings)
    """Where the device plugin's sharing config (time-slicing replicas, renames) is read from."""
    advertisement_stable_s: float = 30.0
    """When the sharing config is not known: how long the advertisement must hold still to count."""
    device_plugin: bool = True
    """False: no NVIDIA device plugin on the node (the DRA driver serves it); nothing in allocatable."""
    force_delete: bool = False
    """Delete pods instead of evicting them (bypasses PodDisruptionBudgets)."""
    resync_period_s: float = 300.0
    """Without a DesiredSource, how often the node is re-checked (a source has its own period)."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """The one retry policy: the same object is the apply engine's (wiring.build_agent)."""
    heartbeat_s: float = 30.0
    """The loop wakes at least this often to tell the health probe it is alive."""
    mig_strategy_auto: bool = False
    """`--mig-strategy auto`: each reconcile takes the strategy from the ClusterPolicy or the plugin's
    advertisement (attempt.preflight); `mig_strategy` is then only the fallback."""
    gate: GateSettings = field(default_factory=GateSettings)
    """What the safety gate may see and allow (attempt.drain.gate)."""
