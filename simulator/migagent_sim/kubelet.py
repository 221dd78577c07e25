"""`FakeKubelet`: the node-local half of Kubernetes that the agent talks to, over the simulator.

It joins an API server (`ClusterApi`: the fake one or a real one; the Node and its pods) with a FakeNvml (the GPUs):
- serves the PodResources API on a unix socket: which workload pod holds which MIG UUID;
- runs workloads: a pod in the apiserver plus an NVML process on its MIG device, so both the
  drain logic (pods) and the apply engine's safety gate (processes) see it; deleting or evicting
  the pod ends the process, and a ReplicaSet-owned pod gets a Pending replacement elsewhere;
- runs the device manager with the kubelet's real device plugin API (migagent_sim.deviceplugin):
  its Registration server on `<device_plugin_dir>/kubelet.sock`, the Node's capacity and
  allocatable from what registered plugins list (kubelet_status), and each workload's device handed
  out through the plugin's Allocate; the simulated NVIDIA device plugin (kubelet_plugin) registers
  there, and so can NVIDIA's real one (tests/nvidia).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any

from migagent.clock import Clock, SystemClock
from migagent.layout.strategy import MigStrategy
from migagent.podresources import PodDevices
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import SimGpu, SimProcess
from migagent_sim.apiserver.objects import running_status
from migagent_sim.cluster_api import ClusterApi
from migagent_sim.deviceplugin import AllocationError, DeviceManager, RegistrationServer
from migagent_sim.deviceplugin.manager import STOP_GRACE_PERIOD_S
from migagent_sim.dra_plugin import FakeDraKubeletPlugin
from migagent_sim.kubelet_devices import (
    MIG_RESOURCE_PREFIX,
    is_plugin_resource,
)
from migagent_sim.kubelet_placement import choose_device, served_as
from migagent_sim.kubelet_plugin import FakeDevicePlugin, PluginContainer, PluginMode, random_suffix
from migagent_sim.kubelet_plugin_sim import SharingSettings, SimulatedPluginContainer
from migagent_sim.kubelet_status import DevicePluginHost, NodeStatusSync
from migagent_sim.podresources_server import PodResourcesServer, serve_pod_resources

__all__ = ["DEFAULT_PLUGIN_LABELS", "FakeKubelet", "PluginMode", "Workload"]

DEFAULT_PLUGIN_LABELS: Mapping[str, str] = {"app": "nvidia-device-plugin-daemonset"}
WORKLOAD_CONTAINER = "main"
WORKLOAD_MEMORY_BYTES = 1 << 30
_FIRST_PID = 20_000
_LOG = logging.getLogger(__name__)
JsonDict = dict[str, Any]


@dataclass(frozen=True)
class Workload:
    """A running pod holding one device, and the NVML process standing for its container."""

    namespace: str
    name: str
    uid: str
    device_uuid: str
    resource_name: str
    pid: int
    labels: Mapping[str, str]
    owner_kind: str | None
    device_id: str = ""
    """What the kubelet reports (`<uuid>::<replica>` for a replicated device); "" means the UUID."""


class FakeKubelet:
    def __init__(
        self,
        api: ClusterApi,
        fake_nvml: FakeNvml,
        *,
        node_name: str,
        socket_path: str,
        plugin_lag_s: float = 0.0,
        clock: Clock | None = None,
        plugin_namespace: str = "gpu-operator",
        plugin_labels: Mapping[str, str] | None = None,
        plugin_mode: PluginMode = "gpu-operator",
        mig_strategy: MigStrategy = MigStrategy.MIXED,
        plugin_daemonset: str = "nvidia-device-plugin-daemonset",
        plugin_config_map: tuple[str, str] | None = None,
        plugin_default_config: str | None = None,
        gfd_labels: bool = False,
        dra: bool = False,
        device_plugin_dir: str | None = None,
        device_plugin_grace_s: float = STOP_GRACE_PERIOD_S,
        node_status_period_s: float = 0.0,
        plugin_container: Callable[[DevicePluginHost, Callable[[str], None]], PluginContainer] | None = None,
    ) -> None:
        """`plugin_config_map` (namespace, name): the device plugin's ConfigMap of sharing configs,
        selected per node by `nvidia.com/device-plugin.config` (kubelet_plugin). `dra`: NVIDIA's DRA
        driver kubelet plugin runs on the node too, publishing ResourceSlices (dra_plugin).
        `device_plugin_dir`: where kubelet.sock and the plugins' sockets live (a real node's
        /var/lib/kubelet/device-plugins/; None: a fresh temporary directory, removed at stop).
        `device_plugin_grace_s`: how long a stopped plugin's resources keep their capacity.
        `node_status_period_s`: the kubelet's nodeStatusUpdateFrequency (0: each change at once; see
        kubelet_status).
        `plugin_container`: what runs in the plugin pod, made from the kubelet's device plugin host
        (None: the simulated plugin; nvidia_plugin.NvidiaPluginContainer runs NVIDIA's binaries)."""
        self._api = api
        self._fake = fake_nvml
        self._clock = clock or SystemClock()
        self.node_name = node_name
        self.socket_path = socket_path
        self._lock = threading.RLock()
        self._own_plugin_dir = device_plugin_dir is None
        # Made at start (RegistrationServer.start), removed at stop: a kubelet never started leaves nothing.
        self.device_plugin_dir = device_plugin_dir or str(Path(tempfile.gettempdir()) / f"dp-{uuid.uuid4().hex[:10]}")
        self.device_manager = DeviceManager(clock=clock, stop_grace_period_s=device_plugin_grace_s)
        self._status = NodeStatusSync(api, node_name, self.device_manager, self._lock, period_s=node_status_period_s)
        self.device_manager.on_change = self._status.plugin_event
        self.registration = RegistrationServer(self.device_plugin_dir, self.device_manager)
        host = DevicePluginHost(self.device_manager, self.device_plugin_dir, self._status)

        def simulated(on_exit: Callable[[str], None]) -> PluginContainer:
            return SimulatedPluginContainer(
                api,
                fake_nvml,
                node_name=node_name,
                host=host,
                strategy=mig_strategy,
                sharing=SharingSettings(plugin_config_map, plugin_default_config),
                lag_s=plugin_lag_s,
                clock=clock or SystemClock(),
                lock=self._lock,
                on_exit=on_exit,
                gfd_labels=gfd_labels,
            )

        self._plugin = FakeDevicePlugin(
            api,
            node_name=node_name,
            namespace=plugin_namespace,
            labels=DEFAULT_PLUGIN_LABELS if plugin_labels is None else plugin_labels,
            mode=plugin_mode,
            lock=self._lock,
            container=simulated if plugin_container is None else partial(plugin_container, host),
            daemonset=plugin_daemonset,
        )
        self._strategy = mig_strategy
        self.dra = (
            FakeDraKubeletPlugin(
                api, fake_nvml, node_name=node_name, clock=clock or SystemClock(), lock=self._lock, lag_s=plugin_lag_s
            )
            if dra
            else None
        )
        self._workloads: dict[tuple[str, str], Workload] = {}
        self.replacements: list[JsonDict] = []
        self._next_pid = _FIRST_PID
        self._server: PodResourcesServer | None = None
        self._running = False
        self._listening = False

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Register the node if needed, serve PodResources, and start the device plugin."""
        with self._lock:
            if self._running:
                return
            self._server = serve_pod_resources(self.socket_path, self.pod_devices, allocatable=self.allocatable)
            self._running = True
            try:
                node = self._api.node(self.node_name)
            except KeyError:
                node = self._api.add_node(self.node_name)
            # The checkpoint of an earlier kubelet on this node: its plugin resources read 0 until re-registered.
            capacity = (node.get("status") or {}).get("capacity") or {}
            self.device_manager.restored(name for name in capacity if is_plugin_resource(name))
            self.registration.start()
            self._status.start()
            if not self._listening:  # the apiserver cannot forget a listener: register once
                self._api.on_pod_deleted(self._on_pod_deleted)
                self._api.on_node_changed(self._on_node_changed)
                self._listening = True
            self._plugin.adopt_or_sync(node)
            if self.dra is not None:
                self.dra.start()

    def stop(self) -> None:
        """Stop serving and stop reacting to the apiserver; pods and processes stay as they are."""
        with self._lock:
            self._running = False
            server, self._server = self._server, None
        self._status.stop()  # teardown writes nothing more to the Node
        self._plugin.container.join()
        with self._lock:
            self._plugin.container.shut_down()
        self.registration.stop()
        if self.dra is not None:
            self.dra.stop()
        if server is not None:
            server.stop(None)
        if self._own_plugin_dir:
            shutil.rmtree(self.device_plugin_dir, ignore_errors=True)

    def restart(self) -> None:
        """The kubelet process restarts while pods and plugins keep running: every plugin connection
        drops, its checkpoint makes every plugin resource read 0, kubelet.sock is created anew (the
        sockets left in the directory removed), and the device plugin, which watches for that file,
        registers again (NVIDIA's plugin restarts its servers on it)."""
        with self._lock:
            self.registration.stop()
            self.device_manager.restored(self.device_manager.known_resources())
            self.registration.start()
            self._plugin.kubelet_restarted()

    def __enter__(self) -> FakeKubelet:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    # --- what the kubelet reports ----------------------------------------------------------------

    def pod_devices(self) -> list[PodDevices]:
        """What PodResources List answers: one entry per running workload pod, with the device ids
        its container was allocated (a pod placed while no plugin served its resource: its device)."""
        with self._lock:
            return [
                PodDevices(w.namespace, w.name, WORKLOAD_CONTAINER, w.resource_name, (w.device_id or w.device_uuid,))
                for w in self._workloads.values()
            ]

    def allocatable(self) -> dict[str, tuple[str, ...]]:
        """What PodResources GetAllocatableResources answers: the healthy devices of registered plugins."""
        return self.device_manager.healthy_devices()

    def sync_node_status(self) -> bool:
        """Write the Node's device-plugin resources now, as a status tick would; True when they changed."""
        return self._status.write_now()

    def advertised(self) -> dict[str, int]:
        """The Node's allocatable for every `nvidia.com/mig-*` resource now, stale ones included as 0."""
        allocatable = self._api.node(self.node_name).get("status", {}).get("allocatable", {})
        return {name: int(value) for name, value in allocatable.items() if name.startswith(MIG_RESOURCE_PREFIX)}

    def plugin_resources(self) -> dict[str, int]:
        """The Node's allocatable for every resource the plugin owns (`nvidia.com/gpu` too), 0s included."""
        allocatable = self._api.node(self.node_name).get("status", {}).get("allocatable", {})
        return {name: int(value) for name, value in allocatable.items() if is_plugin_resource(name)}

    @property
    def plugin_pod(self) -> JsonDict | None:
        with self._lock:
            return self._plugin.pod

    @property
    def plugin_config_restarts(self) -> int:
        """How often the plugin was restarted in place by its config manager (sharing config label changes)."""
        with self._lock:
            return self._plugin.container.config_restarts

    @property
    def plugin_error(self) -> str | None:
        """Why the simulated device plugin exited on the current layout (C < G profiles), or None."""
        with self._lock:
            return self._plugin.container.error

    def workloads(self) -> tuple[Workload, ...]:
        with self._lock:
            return tuple(self._workloads.values())

    # --- workloads -------------------------------------------------------------------------------

    def run_workload(
        self,
        namespace: str,
        name: str,
        *,
        mig_uuid: str | None = None,
        profile: str | None = None,
        labels: Mapping[str, str] | None = None,
        owner_kind: str | None = "ReplicaSet",
        bound: bool = False,
    ) -> JsonDict:
        """Create a Running pod on this node holding one MIG device, with a process on that device.

        `mig_uuid` picks the device; otherwise the first free device of `profile` (e.g. `1g.10gb`,
        `1g.10gb+me` or `nvidia.com/mig-1g.10gb.me`), or of any profile when both are None.
        `bound`: the pod exists, bound to this node by a scheduler; it is started (Running, Ready)."""
        with self._lock:
            held = {w.device_uuid for w in self._workloads.values()}
            device = choose_device(self._fake, self._strategy, self.node_name, mig_uuid, profile, held=held)
            resource, free = served_as(self.device_manager, device)
            pid = self._free_pid()
            self._fake.sim_attach_process(device.uuid, pid=pid, used_memory_bytes=WORKLOAD_MEMORY_BYTES)
            try:
                pod = self._api.update_pod(namespace, name, self._started) if bound else self._api.create_pod(
                    node_name=self.node_name,
                    namespace=namespace,
                    name=name,
                    labels=dict(labels or {}),
                    owner_kind=owner_kind,
                    resources={resource: "1"},
                )
                device_id = self._allocate(pod["metadata"]["uid"], resource, free)
            except BaseException:
                self._fake.sim_detach_process(pid)
                raise
            uid = pod["metadata"]["uid"]
            self._workloads[(namespace, name)] = Workload(
                namespace, name, uid, device.uuid, resource, pid, dict(labels or {}), owner_kind, device_id=device_id
            )
            return pod

    def _started(self, pod: JsonDict) -> None:
        pod["status"] = running_status(self._clock.wall())

    def _allocate(self, pod_uid: str, resource: str, free: list[str]) -> str:
        """The device id the kubelet allocates the workload's container through the plugin's Allocate;
        "" when no plugin serves it (the pod then holds the device without an allocation, as one
        placed before the plugin went away)."""
        if not free:
            return ""
        try:
            entry = self.device_manager.allocate(pod_uid, WORKLOAD_CONTAINER, resource, 1, choose=free[:1])
        except AllocationError as exc:
            _LOG.warning("kubelet on %s could not allocate %s to pod %s: %s", self.node_name, free[0], pod_uid, exc)
            return ""
        return entry.device_ids[0]

    def _free_pid(self) -> int:
        in_use = {p.pid for gpu in self._fake.state.gpus for p in _processes(gpu)}
        while self._next_pid in in_use:
            self._next_pid += 1
        pid, self._next_pid = self._next_pid, self._next_pid + 1
        return pid

    # --- reacting to the apiserver ---------------------------------------------------------------

    def _on_node_changed(self, node: JsonDict) -> None:
        if node["metadata"]["name"] != self.node_name:
            return
        with self._lock:
            if self._running:
                self._plugin.node_changed(node)

    def _on_pod_deleted(self, pod: JsonDict) -> None:
        # Another node's pod is none of this kubelet's business: return before taking the lock, which
        # that node's kubelet may hold while it deletes its own pods (two kubelets, one apiserver).
        if (pod.get("spec") or {}).get("nodeName") != self.node_name:
            return
        with self._lock:
            if not self._running or self._plugin.pod_deleted(pod):
                return
            if self.dra is not None and self.dra.pod_deleted(pod):
                return
            metadata = pod["metadata"]
            workload = self._workloads.get((metadata.get("namespace", ""), metadata["name"]))
            if workload is None or workload.uid != metadata.get("uid"):
                return
            del self._workloads[(workload.namespace, workload.name)]
            self.device_manager.release(workload.uid)
            self._end_process(workload)
            if workload.owner_kind == "ReplicaSet":
                self._replace(workload, pod)

    def _end_process(self, workload: Workload) -> None:
        try:
            self._fake.sim_detach_process(workload.pid)
        except ValueError:
            _LOG.warning("process %d of pod %s/%s was already gone", workload.pid, workload.namespace, workload.name)

    def _replace(self, workload: Workload, gone: JsonDict) -> None:
        """The ReplicaSet's new pod: a new name and UID, left Pending (not bound to this node), under the
        same owner, with the priority admission gives it again from its template's PriorityClass."""
        owner: JsonDict = next(iter(gone["metadata"].get("ownerReferences") or ()), {})
        template: JsonDict = gone.get("spec") or {}
        replacement = self._api.create_pod(
            node_name=None,
            namespace=workload.namespace,
            name=f"{workload.name}-{random_suffix()}",
            labels=dict(workload.labels),
            owner_kind="ReplicaSet",
            owner_name=owner.get("name"),
            owner_uid=owner.get("uid"),
            priority=template.get("priority"),
            priority_class_name=template.get("priorityClassName"),
            resources={workload.resource_name: "1"},
        )
        self.replacements.append(replacement)


def _processes(gpu: SimGpu) -> list[SimProcess]:
    on_mig = [p for gi in gpu.gpu_instances for ci in gi.compute_instances for p in ci.processes]
    return [*gpu.processes, *on_mig]
