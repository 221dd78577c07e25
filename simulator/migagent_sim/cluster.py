"""A whole simulated GPU node in one process: fake API server, fake kubelet, FakeNvml, and agents.

`migagent demo`, the agent's integration tests and `bench.agent_bench` all run the production
agent wiring (`cli.agent.build_agent`) against this, through the real `kubernetes` client over
loopback HTTP and the real PodResources gRPC client over a unix socket.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any

import yaml

from migagent.attempt.listener import MetricsListener
from migagent.attempt.ports import AgentSettings, PhaseHook
from migagent.attempt.post_change import PostChangeSteps
from migagent.clock import Clock, FakeClock, SystemClock
from migagent.kube.adapter import KubeApi
from migagent.kube.client import make_api_client
from migagent.layout.parse import load_layout_file
from migagent.layout.resolve import identity_of, resolve_config
from migagent.layout.strategy import MigStrategy
from migagent.loops.agent import Agent
from migagent.loops.ownership import OwnedAgent
from migagent.node.names import DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL, deploy_label
from migagent.node.sharing_source import SharingSettings
from migagent.nvml.driver import GpuDriver
from migagent.plumbing.health import HealthState
from migagent.reconcile.journal import FileJournal, MemoryJournal, desired_node_hash
from migagent.reconcile.machine import ApplyEngine
from migagent.reconcile.ports import NodeDriver, RebootRequester
from migagent.reconcile.retry import RetryPolicy
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.fakelib_backend import nvml_for
from migagent.sim.reset import SimResetRunner
from migagent.sources.node_label import NodeLabelSource, WatchSettings
from migagent.wiring import AgentOptions, build_agent
from migagent_sim.apiserver import FakeApiServer
from migagent_sim.apiserver.rbac import UserInfo
from migagent_sim.kubelet import FakeKubelet
from migagent_sim.kubelet_plugin import PluginMode

if TYPE_CHECKING:  # access control needs cel-python, a test dependency; the demo runs without it
    from migagent_sim.apiserver.access import AccessControl

JsonDict = dict[str, Any]

DEMO_LAYOUTS = """\
version: v1
mig-configs:
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
  # GPUs 0-3 become "balanced" (two 1g.10gb kept, the other five merged into a 2g.20gb and a
  # 3g.40gb); GPUs 4-7 keep seven 1g.10gb each, untouched.
  half-balanced:
    - devices: [0, 1, 2, 3]
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
    - devices: [4, 5, 6, 7]
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
  all-7g:
    - devices: all
      mig-enabled: true
      mig-devices:
        "7g.80gb": 1
  all-3g.40gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
  all-disabled:
    - devices: all
      mig-enabled: false
      mig-devices: {}
  not-advertisable:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1c.3g.40gb": 3
"""

GPU_OPERATOR_LABELS: Mapping[str, str] = MappingProxyType(
    {deploy_label(c): "true" for c in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm")}
)


@dataclass(frozen=True)
class SimClusterConfig:
    spec: str = "8xH100-80GB-SXM"
    node_name: str = "gpu-node-1"
    layouts_yaml: str = DEMO_LAYOUTS
    start_layout: str | None = "all-1g.10gb"
    """Applied to the GPUs before anything starts (None: MIG disabled, no instances)."""
    labels: Mapping[str, str] = field(default_factory=lambda: dict(GPU_OPERATOR_LABELS))
    plugin_mode: PluginMode = "gpu-operator"
    plugin_lag_s: float = 0.0
    plugin_namespace: str = "gpu-operator"
    """Where the fake kubelet keeps the device-plugin pod (the standalone overlay: nvidia-device-plugin)."""
    plugin_labels: Mapping[str, str] | None = None
    """The plugin pod's labels (None: the GPU Operator's app=nvidia-device-plugin-daemonset)."""
    mig_strategy: MigStrategy = MigStrategy.MIXED
    """The device plugin's strategy; the agent's options() are set to the same."""
    watch_timeout_s: float = 30.0
    plugin_configs: Mapping[str, str] | None = None
    """The device plugin's ConfigMap (config name -> plugin config YAML, see `time_slicing_config`),
    chosen per node by `nvidia.com/device-plugin.config`; None: the plugin runs without sharing."""
    plugin_config_map: tuple[str, str] = ("gpu-operator", "nvidia-device-plugin-configs")
    plugin_default_config: str | None = None
    agent_reads_plugin_config: bool = True
    """options() point the agent at the plugin's ConfigMap (False: it must learn sharing otherwise)."""
    gfd_labels: bool = False
    """Publish GPU Feature Discovery's per-resource labels (replicas, product) with each registration."""
    dra_driver: bool = False
    """NVIDIA's DRA driver kubelet plugin runs on the node, publishing ResourceSlices (static MIG)."""


def time_slicing_config(
    replicas: int,
    *,
    resources: tuple[str, ...] = ("nvidia.com/mig-1g.10gb",),
    rename_by_default: bool = False,
    rename: Mapping[str, str] | None = None,
) -> str:
    """A device plugin config (version v1) replicating `resources` `replicas` times each."""
    entries = [
        {"name": name, "replicas": replicas, **({"rename": rename[name]} if rename and name in rename else {})}
        for name in resources
    ]
    config = {
        "version": "v1",
        "flags": {"migStrategy": "mixed"},
        "sharing": {"timeSlicing": {"renameByDefault": rename_by_default, "resources": entries}},
    }
    return str(yaml.safe_dump(config, sort_keys=False))


PDB_BLOCKING_FOR_NOW: dict[str, int] = {
    "observedGeneration": 1,
    "disruptionsAllowed": 0,
    "currentHealthy": 1,
    "desiredHealthy": 1,
    "expectedPods": 3,
}
"""A PodDisruptionBudget status (minAvailable 1) that blocks for now, not for good: 3 pods expected, 1
healthy (the other replicas not Ready yet). With 1 pod expected it would never allow an eviction,
and the agent's safety gate would refuse the change before touching the node."""


def fast_options(node_name: str, layout_file: Path, socket_path: str) -> AgentOptions:
    """Agent options with every wait and poll cut down to simulator speed."""
    return AgentOptions(
        node_name=node_name,
        settings=AgentSettings(
            config_file=layout_file,
            drain_timeout_s=10.0,
            readvertise_timeout_s=10.0,
            readvertise_poll_s=0.05,
            plugin_settle_s=5.0,
            advertisement_stable_s=0.3,
            resync_period_s=60.0,
            retry=RetryPolicy(failure_backoff_initial=0.2, failure_backoff_max=2.0),
            heartbeat_s=1.0,
        ),
        podresources_socket=socket_path,
        plugin_timeout_s=10.0,
        poll_interval_s=0.05,
        watch=WatchSettings(resync_period_s=60.0, watch_timeout_s=30.0, backoff_initial_s=0.05, backoff_max_s=0.5),
        lease_duration_s=2,
    )


class RunningAgent:
    """An agent looping in a thread with its label source; `stop()` ends both."""

    def __init__(self, agent: Agent, source: NodeLabelSource) -> None:
        self.agent = agent
        self.source = source
        self.stop_event = threading.Event()
        self._thread = threading.Thread(target=agent.run, args=(self.stop_event,), name="migagent", daemon=True)

    def start(self) -> RunningAgent:
        self.source.start()
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        self.stop_event.set()
        self._thread.join(timeout_s)
        self.source.stop(join_timeout_s=0.5)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


class SimCluster:
    def __init__(
        self,
        workdir: Path,
        config: SimClusterConfig | None = None,
        *,
        access: AccessControl | None = None,
        agent_account: tuple[str, str] = ("migagent", "migagent"),
    ) -> None:
        """With `access` (rendered RBAC and admission policies), the API server enforces them and each agent
        authenticates as the service account `agent_account` (namespace, name) bound to this node."""
        self.config = config or SimClusterConfig()
        self.agent_account = agent_account
        self.workdir = workdir
        self.layout_file = workdir / "mig-layouts.yaml"
        self.journal_dir = workdir / "journal"
        # A unix socket path must stay under ~107 bytes; test directories can be longer.
        self._socket_dir = Path(tempfile.mkdtemp(prefix="migsim-"))
        self.socket_path = str(self._socket_dir / "kubelet.sock")
        self.fake = FakeNvml.from_spec(self.config.spec)
        # Pods stay Terminating for 1% of their grace period (a 30 s one: 0.3 s).
        self.api = FakeApiServer(default_watch_timeout_s=self.config.watch_timeout_s, access=access, grace_scale=0.01)
        self.kubelet = FakeKubelet(
            self.api,
            self.fake,
            node_name=self.config.node_name,
            socket_path=self.socket_path,
            plugin_lag_s=self.config.plugin_lag_s,
            plugin_mode=self.config.plugin_mode,
            plugin_namespace=self.config.plugin_namespace,
            plugin_labels=self.config.plugin_labels,
            mig_strategy=self.config.mig_strategy,
            plugin_config_map=self.config.plugin_config_map if self.config.plugin_configs is not None else None,
            plugin_default_config=self.config.plugin_default_config,
            gfd_labels=self.config.gfd_labels,
            dra=self.config.dra_driver,
        )
        self._drivers: list[GpuDriver] = []
        self._running: list[RunningAgent] = []

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> SimCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.layout_file.write_text(self.config.layouts_yaml, encoding="utf-8")
        if self.config.start_layout is not None:
            self._apply_directly(self.config.start_layout)
        self.api.start()
        if self.config.plugin_configs is not None:
            namespace, name = self.config.plugin_config_map
            self.api.put_config_map(namespace, name, self.config.plugin_configs)
        labels = dict(self.config.labels)
        if self.config.start_layout is not None:
            labels[MIG_CONFIG_LABEL] = self.config.start_layout
        self.api.add_node(self.config.node_name, labels=labels)
        self.kubelet.start()
        return self

    def stop(self) -> None:
        for running in self._running:
            running.stop(timeout_s=5.0)
        self.kubelet.stop()
        self.api.stop()
        for driver in self._drivers:
            driver.__exit__(None, None, None)
        shutil.rmtree(self._socket_dir, ignore_errors=True)

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- agents ---------------------------------------------------------------------------------

    def options(self, **settings: Any) -> AgentOptions:
        """Fast options; keyword arguments replace AgentSettings fields (e.g. drain_timeout_s=1)."""
        base = fast_options(self.config.node_name, self.layout_file, self.socket_path)
        defaults: dict[str, Any] = {"mig_strategy": self.config.mig_strategy}
        if self.config.plugin_configs is not None and self.config.agent_reads_plugin_config:
            defaults["sharing"] = SharingSettings(
                config_map="/".join(self.config.plugin_config_map), default_config=self.config.plugin_default_config
            )
        settings = {**defaults, **settings}
        return replace(base, settings=replace(base.settings, **settings), dra=self.config.dra_driver)

    def driver(self) -> GpuDriver:
        driver = GpuDriver(nvml_for(self.fake), reset_runner=SimResetRunner(self.fake)).__enter__()
        self._drivers.append(driver)
        return driver

    def build_agent(
        self,
        options: AgentOptions | None = None,
        *,
        phase_hook: PhaseHook | None = None,
        listener: MetricsListener | None = None,
        health: HealthState | None = None,
        reboot_requester: RebootRequester | None = None,
        clock: Clock | None = None,
        wrap_driver: Callable[[GpuDriver], NodeDriver] | None = None,
        post_change: PostChangeSteps | None = None,
    ) -> tuple[OwnedAgent, NodeLabelSource]:
        """A fresh agent (new API client, driver handle, journal object) as a restarted pod would get.

        `wrap_driver` lets a test put a seam around the GPU driver (to crash mid-apply, say)."""
        options = options or self.options()
        clock = clock or SystemClock()
        api = self.agent_api(options, clock=clock)
        return build_agent(
            options,
            api=api,
            driver=self.driver() if wrap_driver is None else wrap_driver(self.driver()),
            journal=FileJournal(self.journal_dir),
            clock=clock,
            reboot_requester=reboot_requester,
            listener=listener,
            health=health,
            phase_hook=phase_hook,
            post_change=post_change,
        )

    def agent_api(self, options: AgentOptions | None = None, *, clock: Clock | None = None) -> KubeApi:
        """A client of this API server as the agent's service account (its token, when access is enforced)."""
        options = options or self.options()
        client = make_api_client(kubeconfig=None, api_server=self.api.url)
        token = self.agent_token()
        if token is not None:
            client.configuration.api_key = {"authorization": token}
            client.configuration.api_key_prefix = {"authorization": "Bearer"}
        clock = clock or SystemClock()
        return KubeApi(client, node_name=options.node_name, clock=clock, timeout=options.request_timeout)

    def agent_token(self) -> str | None:
        """A fresh token for the agent's service account bound to this node (None without access control)."""
        if self.api.access is None:
            return None
        namespace, name = self.agent_account
        return self.api.issue_token(UserInfo.service_account(namespace, name, node_name=self.config.node_name))

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig for this API server with the agent's token (as `--kubeconfig` for `migagent agent`)."""
        user: JsonDict = {"token": self.agent_token()} if self.api.access is not None else {}
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sim", "cluster": {"server": self.api.url}}],
            "users": [{"name": "migagent", "user": user}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "migagent"}}],
            "current-context": "sim",
        }
        path.write_text(yaml.safe_dump(kubeconfig), encoding="utf-8")
        return path

    def start_agent(self, options: AgentOptions | None = None, **kwargs: Any) -> RunningAgent:
        running = RunningAgent(*self.build_agent(options, **kwargs)).start()
        self._running.append(running)
        return running

    # -- the world ------------------------------------------------------------------------------

    def label(self, layout: str | None) -> None:
        """Set (or, with None, remove) `nvidia.com/mig.config`, as an admin would."""

        def edit(node: JsonDict) -> None:
            labels = node["metadata"].setdefault("labels", {})
            if layout is None:
                labels.pop(MIG_CONFIG_LABEL, None)
            else:
                labels[MIG_CONFIG_LABEL] = layout

        self.api.update_node(self.config.node_name, edit)

    def select_plugin_config(self, key: str | None) -> None:
        """Set (or remove) `nvidia.com/device-plugin.config`, the device plugin's per-node sharing config."""

        def edit(node: JsonDict) -> None:
            labels = node["metadata"].setdefault("labels", {})
            if key is None:
                labels.pop(DEVICE_PLUGIN_CONFIG_LABEL, None)
            else:
                labels[DEVICE_PLUGIN_CONFIG_LABEL] = key

        self.api.update_node(self.config.node_name, edit)

    def edit_node(self, fn: Callable[[JsonDict], None]) -> None:
        self.api.update_node(self.config.node_name, fn)

    def node(self) -> JsonDict:
        return self.api.node(self.config.node_name)

    def mig_uuid(self, gpu: int, slot: int) -> str:
        """The MIG device (first compute instance) of the GPU instance starting at `slot` on `gpu`."""
        for gi in self.fake.state.gpus[gpu].gpu_instances:
            if gi.placement.start == slot and gi.compute_instances:
                return str(gi.compute_instances[0].uuid)
        raise KeyError(f"GPU {gpu} has no GPU instance with compute instances starting at slot {slot}")

    def _apply_directly(self, layout_name: str) -> None:
        """Put the GPUs in a layout before the cluster exists (no agent, no journal kept)."""
        with GpuDriver(nvml_for(self.fake), reset_runner=SimResetRunner(self.fake)) as driver:
            observation = driver.observe()
            layout = load_layout_file(self.layout_file)
            desired = resolve_config(layout, layout_name, [identity_of(gpu) for gpu in observation.gpus])
            engine = ApplyEngine(driver, MemoryJournal(), clock=FakeClock())
            result = engine.apply(desired, layout_hash=desired_node_hash(desired), config_name=layout_name)
            if not result.converged:
                raise RuntimeError(f"could not apply the start layout {layout_name}: {result.error}")
