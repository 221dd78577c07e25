"""A whole simulated GPU node in one process: an API server, the fake kubelet, FakeNvml, and agents.

`Simulation` is the node over any `ClusterApi`; `SimCluster` is it over the in-process FakeApiServer
(tests/realkube's `RealSimCluster` is it over a real kube-apiserver). `migagent demo`, the agent's
integration tests and `bench.agent_bench` all run the production agent wiring (`wiring.build_agent`)
against it, through the real `kubernetes` client over loopback HTTP and the real PodResources gRPC
client over a unix socket.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import yaml

from migagent.attempt.advertise.sharing_source import SharingSettings
from migagent.attempt.listener import MetricsListener
from migagent.attempt.ports import PhaseHook
from migagent.attempt.window.post_change import PostChangeSteps
from migagent.clock import Clock, FakeClock, SystemClock
from migagent.kube.adapter import KubeApi
from migagent.kube.client import make_api_client
from migagent.layout.parse import load_layout_file
from migagent.layout.resolve import identity_of, resolve_config
from migagent.loops.agent import Agent
from migagent.loops.ownership import OwnedAgent
from migagent.node.names import DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL
from migagent.nvml.driver import GpuDriver
from migagent.plumbing.health import HealthState
from migagent.reconcile.journal import FileJournal, MemoryJournal, desired_node_hash
from migagent.reconcile.machine import ApplyEngine
from migagent.reconcile.ports import NodeDriver, RebootRequester
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.persistence import persist_after_each_mutation
from migagent.sim.reset import SimResetRunner
from migagent.sources.node_label import NodeLabelSource
from migagent.wiring import AgentOptions, build_agent
from migagent_sim.apiserver import FakeApiServer
from migagent_sim.apiserver.rbac import UserInfo
from migagent_sim.cluster_api import ClusterApi, JsonDict
from migagent_sim.cluster_config import (
    DEMO_LAYOUTS,
    GPU_OPERATOR_LABELS,
    PDB_BLOCKING_FOR_NOW,
    SimClusterConfig,
    fast_options,
    make_kubelet,
    time_slicing_config,
)
from migagent_sim.fakelib.backend import nvml_for
from migagent_sim.kubelet import FakeKubelet
from migagent_sim.nvidia_plugin import ContainerMaker, NvidiaPluginSettings, gpu_node_command, nvidia_plugin

if TYPE_CHECKING:  # access control needs cel-python, a test dependency; the demo runs without it
    from migagent_sim.apiserver.access import AccessControl

__all__ = [
    "DEMO_LAYOUTS",
    "GPU_OPERATOR_LABELS",
    "PDB_BLOCKING_FOR_NOW",
    "AnySimulation",
    "RunningAgent",
    "SimCluster",
    "SimClusterConfig",
    "Simulation",
    "fast_options",
    "time_slicing_config",
]

Api_co = TypeVar("Api_co", bound=ClusterApi, covariant=True)


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


class Simulation(Generic[Api_co]):
    """One simulated GPU node over the API server `api` (the fake one, or a real one)."""

    def __init__(
        self,
        workdir: Path,
        config: SimClusterConfig,
        api: Api_co,
        *,
        agent_account: tuple[str, str] = ("migagent", "migagent"),
    ) -> None:
        """`agent_account` (namespace, name): the service account each agent authenticates as, bound to
        this node, where the API server enforces access control."""
        self.config = config
        self.agent_account = agent_account
        self.workdir = workdir
        self.layout_file = workdir / "mig-layouts.yaml"
        self.journal_dir = workdir / "journal"
        # A unix socket path must stay under ~107 bytes; test directories can be longer.
        self._socket_dir = Path(tempfile.mkdtemp(prefix="migsim-"))
        self.socket_path = str(self._socket_dir / "kubelet.sock")
        self.fake = FakeNvml.from_spec(self.config.spec)
        self.state_file = workdir / "gpu-node.json"
        """The GPUs' state for NVIDIA's binaries (with `nvidia_tools`), saved after every change."""
        self._api = api
        self.kubelet: FakeKubelet = make_kubelet(
            self.config, api, self.fake, socket_path=self.socket_path, plugin_container=self._nvidia_plugin()
        )
        self._drivers: list[GpuDriver] = []
        self._running: list[RunningAgent] = []

    @property
    def api(self) -> Api_co:
        return self._api

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Simulation[Api_co]:
        """Everything up, or (when a part cannot start: a socket path too long, a port) everything started
        so far stopped again and its folders removed, then the error."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> Simulation[Api_co]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.layout_file.write_text(self.config.layouts_yaml, encoding="utf-8")
        if self.config.start_layout is not None:
            self._apply_directly(self.config.start_layout)
        self.api.start()
        if self.config.nvidia_tools is not None:
            self.fake.save(self.state_file)
            persist_after_each_mutation(self.fake, self.state_file)
            self._write_plugin_kubeconfig()
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

    def __enter__(self) -> Simulation[Api_co]:
        return self.start()

    def _nvidia_plugin(self) -> ContainerMaker | None:
        tools = self.config.nvidia_tools
        if tools is None:
            return None
        settings = NvidiaPluginSettings(
            device_plugin=tools.device_plugin,
            config_manager=tools.config_manager,
            node_command=gpu_node_command(self.state_file),
            mig_strategy=self.config.mig_strategy,
            workdir=self.workdir,
            node_name=self.config.node_name,
            configs=self.config.plugin_configs,
            default_config=self.config.plugin_default_config,
            kubeconfig=self.workdir / "plugin-kubeconfig" if self.config.plugin_configs is not None else None,
            restart_backoff_s=self.config.plugin_restart_backoff_s,
        )
        return nvidia_plugin(settings)

    def _write_plugin_kubeconfig(self) -> None:
        """How NVIDIA's config-manager reaches the API server (anonymous: the fake one without access control)."""
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sim", "cluster": {"server": self.api.url}}],
            "users": [{"name": "device-plugin", "user": {}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "device-plugin"}}],
            "current-context": "sim",
        }
        (self.workdir / "plugin-kubeconfig").write_text(yaml.safe_dump(kubeconfig), encoding="utf-8")

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
        """Put the GPUs in a layout before the cluster exists."""
        apply_directly(self.fake, self.layout_file, layout_name)


AnySimulation = Simulation[ClusterApi]
"""A simulated node over whichever API server: what a scenario run on the fake and the real one takes."""


class SimCluster(Simulation[FakeApiServer]):
    """The simulated node over the in-process FakeApiServer."""

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
        config = config or SimClusterConfig()
        # Pods stay Terminating for 1% of their grace period (a 30 s one: 0.3 s).
        api = FakeApiServer(default_watch_timeout_s=config.watch_timeout_s, access=access, grace_scale=0.01)
        super().__init__(workdir, config, api, agent_account=agent_account)

    def start(self) -> SimCluster:
        super().start()
        return self

    def __enter__(self) -> SimCluster:
        return self.start()


def apply_directly(fake: FakeNvml, layout_file: Path, layout_name: str) -> None:
    """Put the GPUs in a layout before anything runs (no agent, no journal kept)."""
    with GpuDriver(nvml_for(fake), reset_runner=SimResetRunner(fake)) as driver:
        observation = driver.observe()
        layout = load_layout_file(layout_file)
        desired = resolve_config(layout, layout_name, [identity_of(gpu) for gpu in observation.gpus])
        engine = ApplyEngine(driver, MemoryJournal(), clock=FakeClock())
        result = engine.apply(desired, layout_hash=desired_node_hash(desired), config_name=layout_name)
        if not result.converged:
            raise RuntimeError(f"could not apply the start layout {layout_name}: {result.error}")
