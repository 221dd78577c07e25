"""A pool of simulated GPU nodes behind one fake API server: each node its own FakeNvml, fake
kubelet (PodResources socket, device plugin) and agent, all in this process.

`migagent demo rollout` and the rollout tests run `migagent rollout` against it: the rollout sees
only the API server, as it would a real cluster, and every agent is the production wiring
(`migagent.wiring.build_agent`) with its waits scaled down (cluster.fast_options).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kubernetes.client import ApiClient

from migagent.clock import SystemClock
from migagent.kube.adapter import KubeApi
from migagent.kube.client import make_api_client
from migagent.node.names import (
    CONDITION_TYPE,
    DESIRED_ANNOTATION,
    LAYOUTS_CONFIGMAP_KEY,
    LAYOUTS_NAMESPACE,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
)
from migagent.nvml.driver import GpuDriver
from migagent.reconcile.journal import FileJournal
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner
from migagent.sources.node_label import WatchSettings
from migagent.wiring import AgentOptions, build_agent
from migagent_sim.apiserver import FakeApiServer
from migagent_sim.apiserver.rbac import UserInfo
from migagent_sim.cluster import DEMO_LAYOUTS, GPU_OPERATOR_LABELS, RunningAgent, apply_directly, fast_options
from migagent_sim.fakelib.backend import nvml_for
from migagent_sim.kubelet import FakeKubelet

if TYPE_CHECKING:  # access control needs cel-python, a test dependency; the demo runs without it
    from migagent_sim.apiserver.access import AccessControl

JsonDict = dict[str, Any]
POOL_LABEL = "pool"
ADMIN = UserInfo("kubernetes-admin", ("system:masters", "system:authenticated"))


@dataclass(frozen=True)
class SimPoolConfig:
    nodes: int = 6
    spec: str = "2xH100-80GB-SXM"
    """Each node's GPUs (small, so a pool of six converges in seconds)."""
    pool: str = "h100"
    """The value of label `pool` on every node (select them with -l pool=h100)."""
    layouts_yaml: str = DEMO_LAYOUTS
    start_layout: str = "all-1g.10gb"
    start_layouts: Mapping[str, str] = field(default_factory=dict)
    """Node name -> its own start layout, where it differs from `start_layout`."""
    plugin_lag_s: float = 0.0
    """How long each node's device plugin takes to re-advertise (a longer change per node)."""
    labels: Mapping[str, str] = field(default_factory=lambda: dict(GPU_OPERATOR_LABELS))
    resync_s: float = 0.3
    """The agents' resync: how soon a pod that starts or ends shows in migagent.io/observed."""
    watch_timeout_s: float = 30.0

    def node_name(self, index: int) -> str:
        return f"gpu-{self.pool}-{index + 1}"


class PoolNode:
    """One simulated node of the pool: its GPUs, its kubelet and (once started) its agent."""

    def __init__(
        self, name: str, api: FakeApiServer, workdir: Path, socket_dir: Path, *, spec: str, plugin_lag_s: float
    ) -> None:
        self.name = name
        self.workdir = workdir
        self.fake = FakeNvml.from_spec(spec)
        self.socket_path = str(socket_dir / f"{name}.sock")
        self.kubelet = FakeKubelet(
            api, self.fake, node_name=name, socket_path=self.socket_path, plugin_lag_s=plugin_lag_s
        )
        self.agent: RunningAgent | None = None
        self._drivers: list[GpuDriver] = []

    def driver(self) -> GpuDriver:
        driver = GpuDriver(nvml_for(self.fake), reset_runner=SimResetRunner(self.fake)).__enter__()
        self._drivers.append(driver)
        return driver

    def mig_uuid(self, gpu: int, slot: int) -> str:
        for gi in self.fake.state.gpus[gpu].gpu_instances:
            if gi.placement.start == slot and gi.compute_instances:
                return str(gi.compute_instances[0].uuid)
        raise KeyError(f"node {self.name}: GPU {gpu} has no GPU instance starting at slot {slot}")

    def apply_directly(self, layout_file: Path, layout_name: str) -> None:
        """The GPUs in a layout before anything runs (no agent, no journal kept)."""
        apply_directly(self.fake, layout_file, layout_name)

    def stop(self) -> None:
        if self.agent is not None:
            self.agent.stop(timeout_s=5.0)
            self.agent = None
        self.kubelet.stop()
        for driver in self._drivers:
            driver.__exit__(None, None, None)
        self._drivers.clear()


class SimPool:
    def __init__(
        self, workdir: Path, config: SimPoolConfig | None = None, *, access: AccessControl | None = None
    ) -> None:
        """With `access` (rendered RBAC and admission policies), the API server enforces them and each agent
        authenticates as service account migagent/migagent bound to its node."""
        self.config = config or SimPoolConfig()
        self.workdir = workdir
        self.layout_file = workdir / "mig-layouts.yaml"
        self._socket_dir = Path(tempfile.mkdtemp(prefix="migpool-"))
        self.api = FakeApiServer(
            default_watch_timeout_s=self.config.watch_timeout_s, grace_scale=0.01, access=access
        )
        self.nodes: dict[str, PoolNode] = {}
        for index in range(self.config.nodes):
            name = self.config.node_name(index)
            self.nodes[name] = PoolNode(
                name, self.api, workdir / name, self._socket_dir, spec=self.config.spec,
                plugin_lag_s=self.config.plugin_lag_s,
            )

    @property
    def selector(self) -> str:
        return f"{POOL_LABEL}={self.config.pool}"

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, *, agents: bool = True) -> SimPool:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.layout_file.write_text(self.config.layouts_yaml, encoding="utf-8")
        self.api.start()
        self.api.put_config_map(
            LAYOUTS_NAMESPACE, "migagent-layouts-sim", {LAYOUTS_CONFIGMAP_KEY: self.config.layouts_yaml}
        )
        for node in self.nodes.values():
            node.workdir.mkdir(parents=True, exist_ok=True)
            start = self.config.start_layouts.get(node.name, self.config.start_layout)
            node.apply_directly(self.layout_file, start)
            labels = {**self.config.labels, POOL_LABEL: self.config.pool, MIG_CONFIG_LABEL: start}
            self.api.add_node(node.name, labels=labels)
            node.kubelet.start()
        if agents:
            for name in self.nodes:
                self.start_agent(name)
        return self

    def stop(self) -> None:
        for node in self.nodes.values():
            node.stop()
        self.api.stop()
        shutil.rmtree(self._socket_dir, ignore_errors=True)

    def __enter__(self) -> SimPool:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- agents ---------------------------------------------------------------------------------

    def options(self, name: str) -> AgentOptions:
        node = self.nodes[name]
        base = fast_options(name, self.layout_file, node.socket_path)
        resync = self.config.resync_s
        return replace(
            base,
            settings=replace(base.settings, resync_period_s=resync),
            watch=WatchSettings(
                resync_period_s=resync, watch_timeout_s=30.0, backoff_initial_s=0.05, backoff_max_s=0.5
            ),
        )

    def start_agent(self, name: str) -> RunningAgent:
        node = self.nodes[name]
        options = self.options(name)
        clock = SystemClock()
        client = self.client(UserInfo.service_account("migagent", "migagent", node_name=name))
        api = KubeApi(client, node_name=name, clock=clock, timeout=options.request_timeout)
        agent, source = build_agent(
            options, api=api, driver=node.driver(), journal=FileJournal(node.workdir / "journal"), clock=clock
        )
        node.agent = RunningAgent(agent, source).start()
        return node.agent

    def client(self, user: UserInfo | None = None) -> ApiClient:
        """A client of this API server; with access control on, authenticated as `user` (else as an admin)."""
        client = make_api_client(kubeconfig=None, api_server=self.api.url)
        if self.api.access is not None:
            token = self.api.issue_token(user or ADMIN)
            client.configuration.api_key = {"authorization": token}
            client.configuration.api_key_prefix = {"authorization": "Bearer"}
        return client

    # -- the world ------------------------------------------------------------------------------

    def node(self, name: str) -> JsonDict:
        return self.api.node(name)

    def labels(self, name: str) -> dict[str, str]:
        return dict(self.node(name)["metadata"].get("labels", {}))

    def run_workloads(self, placements: Sequence[tuple[str, str, int, int, Mapping[str, str]]]) -> None:
        """(node, pod name, GPU, slot of its GI, labels): a Running pod in namespace `ml` on that MIG device."""
        for node_name, pod, gpu, slot, labels in placements:
            node = self.nodes[node_name]
            node.kubelet.run_workload("ml", pod, mig_uuid=node.mig_uuid(gpu, slot), labels=dict(labels))



class ReplicaScheduler:
    """Plays the scheduler for some pods: once one is gone (evicted) and its node reports success again,
    a replacement with the same labels runs (Running, Ready) on that node, so a managed PDB allows a
    disruption again. Runs in a thread while used as a context manager."""

    def __init__(self, pool: SimPool, pods: Sequence[tuple[str, str, Mapping[str, str]]], *,
                 say: Callable[[str], None] | None = None) -> None:
        """`pods`: (node, name in namespace ml, labels)."""
        self._pool = pool
        self._pods = list(pods)
        self._say = say
        self._stop = threading.Event()
        self._placed: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="sim-replica-scheduler", daemon=True)

    def __enter__(self) -> ReplicaScheduler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            for node, pod, labels in self._pods:
                if pod in self._placed or self._pool.api.pod("ml", pod) is not None:
                    continue
                if self._pool.labels(node).get(MIG_CONFIG_STATE_LABEL) != "success":
                    continue
                self._placed.add(pod)
                self._pool.nodes[node].kubelet.run_workload("ml", f"{pod}-new", profile="1g.10gb", labels=labels)
                if self._say is not None:
                    self._say(f"the replacement of ml/{pod} is Ready on {node}")


class PoolMonitor:
    """Follows every committed Node write: how often each node's layout label changed, and the most GPUs
    out of service at once (a node from its label change until its agent reports success for it)."""

    def __init__(self, pool: SimPool) -> None:
        self._gpus = {name: len(node.fake.state.gpus) for name, node in pool.nodes.items()}
        self._lock = threading.Lock()
        self._labels: dict[str, str | None] = {}
        self._unavailable: set[str] = set()
        self.relabels: dict[str, int] = {}
        self.max_unavailable_gpus = 0
        for name in pool.nodes:
            self._labels[name] = pool.labels(name).get(MIG_CONFIG_LABEL)
        pool.api.on_node_changed(self._changed)

    def _changed(self, node: JsonDict) -> None:
        name = node["metadata"]["name"]
        if name not in self._gpus:
            return
        labels = node["metadata"].get("labels", {})
        label = labels.get(MIG_CONFIG_LABEL)
        with self._lock:
            if label != self._labels.get(name):
                self._labels[name] = label
                self.relabels[name] = self.relabels.get(name, 0) + 1
            if _reports_success(node, label):
                self._unavailable.discard(name)
            else:
                self._unavailable.add(name)
            self.max_unavailable_gpus = max(self.max_unavailable_gpus, sum(self._gpus[n] for n in self._unavailable))


def _reports_success(node: JsonDict, label: str | None) -> bool:
    metadata = node["metadata"]
    if label is None:
        return True
    try:
        desired = json.loads(metadata.get("annotations", {}).get(DESIRED_ANNOTATION, "{}")).get("layout")
    except ValueError:
        desired = None
    conditions = node.get("status", {}).get("conditions", [])
    ready = any(c.get("type") == CONDITION_TYPE and c.get("status") == "True" for c in conditions)
    return desired == label and ready and metadata.get("labels", {}).get(MIG_CONFIG_STATE_LABEL) == "success"
