"""`FakeKubelet`: the node-local half of Kubernetes that the agent talks to, over the simulator.

It joins an API server (`ClusterApi`: the fake one or a real one; the Node and its pods) with a FakeNvml (the GPUs):
- serves the PodResources API on a unix socket: which workload pod holds which MIG UUID;
- runs workloads: a pod in the apiserver plus an NVML process on its MIG device, so both the
  drain logic (pods) and the apply engine's safety gate (processes) see it; deleting or evicting
  the pod ends the process, and a ReplicaSet-owned pod gets a Pending replacement elsewhere;
- runs the NVIDIA device plugin (see kubelet_plugin): its pod, and the node's advertised resources.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from migagent.clock import Clock, SystemClock
from migagent.layout.strategy import MigStrategy
from migagent.podresources import PodDevices
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import SimGpu, SimProcess
from migagent_sim.apiserver.objects import running_status
from migagent_sim.cluster_api import ClusterApi
from migagent_sim.dra_plugin import FakeDraKubeletPlugin
from migagent_sim.kubelet_devices import (
    MIG_RESOURCE_PREFIX,
    PluginDevice,
    is_plugin_resource,
    mig_resource_name,
    read_inventory,
)
from migagent_sim.kubelet_plugin import FakeDevicePlugin, PluginMode, random_suffix
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
    ) -> None:
        """`plugin_config_map` (namespace, name): the device plugin's ConfigMap of sharing configs,
        selected per node by `nvidia.com/device-plugin.config` (kubelet_plugin). `dra`: NVIDIA's DRA
        driver kubelet plugin runs on the node too, publishing ResourceSlices (dra_plugin)."""
        self._api = api
        self._fake = fake_nvml
        self._clock = clock or SystemClock()
        self.node_name = node_name
        self.socket_path = socket_path
        self._lock = threading.RLock()
        self._plugin = FakeDevicePlugin(
            api,
            fake_nvml,
            node_name=node_name,
            namespace=plugin_namespace,
            labels=DEFAULT_PLUGIN_LABELS if plugin_labels is None else plugin_labels,
            mode=plugin_mode,
            lag_s=plugin_lag_s,
            clock=clock or SystemClock(),
            lock=self._lock,
            strategy=mig_strategy,
            daemonset=plugin_daemonset,
            config_map=plugin_config_map,
            default_config=plugin_default_config,
            gfd_labels=gfd_labels,
        )
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
        self._plugin.stop()
        if self.dra is not None:
            self.dra.stop()
        if server is not None:
            server.stop(None)

    def __enter__(self) -> FakeKubelet:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    # --- what the kubelet reports ----------------------------------------------------------------

    def pod_devices(self) -> list[PodDevices]:
        """What PodResources List answers: one entry per running workload pod."""
        with self._lock:
            return [
                PodDevices(w.namespace, w.name, WORKLOAD_CONTAINER, w.resource_name, (w.device_id or w.device_uuid,))
                for w in self._workloads.values()
            ]

    def allocatable(self) -> dict[str, tuple[str, ...]]:
        """What PodResources GetAllocatableResources answers: the devices the plugin registered."""
        with self._lock:
            return dict(self._plugin.registered)

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
            return self._plugin.config_restarts

    @property
    def plugin_error(self) -> str | None:
        """Why the simulated device plugin exited on the current layout (C < G profiles), or None."""
        with self._lock:
            return self._plugin.error

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
            device = self._choose_device(mig_uuid=mig_uuid, profile=profile)
            resource = self._plugin.advertised_name(device.resource_name)
            replicated = self._plugin.sharing.advertised(device.resource_name).replicas > 1
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
            except BaseException:
                self._fake.sim_detach_process(pid)
                raise
            uid = pod["metadata"]["uid"]
            self._workloads[(namespace, name)] = Workload(
                namespace, name, uid, device.uuid, resource, pid, dict(labels or {}), owner_kind,
                device_id=f"{device.uuid}::0" if replicated else "",
            )
            return pod

    def _started(self, pod: JsonDict) -> None:
        pod["status"] = running_status(self._clock.wall())

    def _choose_device(self, *, mig_uuid: str | None, profile: str | None) -> PluginDevice:
        inventory = read_inventory(self._fake, self._plugin.strategy)
        wanted = mig_resource_name(profile) if profile is not None else None
        if mig_uuid is not None:
            device = inventory.by_uuid(mig_uuid)
            if device is None:
                known = ", ".join(d.uuid for d in inventory.devices) or "none"
                raise ValueError(f"mig_uuid {mig_uuid!r} is not a device of node {self.node_name}; devices: {known}")
            if wanted is not None and _mixed_name(device) != wanted:
                raise ValueError(f"mig_uuid {mig_uuid} is a {_mixed_name(device)} device, not {wanted}")
            return device
        held = {w.device_uuid for w in self._workloads.values()} | self._uuids_with_processes()
        candidates = [
            d
            for d in inventory.devices
            if d.profile is not None and (wanted is None or _mixed_name(d) == wanted) and d.uuid not in held
        ]
        if not candidates:
            free = sorted({_mixed_name(d) for d in inventory.devices if d.profile is not None and d.uuid not in held})
            raise ValueError(
                f"no free MIG device{' of profile ' + str(profile) if profile else ''} on node {self.node_name}; "
                f"free: {', '.join(free) or 'none'}"
            )
        return candidates[0]

    def _uuids_with_processes(self) -> set[str]:
        return {
            ci.uuid
            for gpu in self._fake.state.gpus
            for gi in gpu.gpu_instances
            for ci in gi.compute_instances
            if ci.processes
        }

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
            self._end_process(workload)
            if workload.owner_kind == "ReplicaSet":
                self._replace(workload)

    def _end_process(self, workload: Workload) -> None:
        try:
            self._fake.sim_detach_process(workload.pid)
        except ValueError:
            _LOG.warning("process %d of pod %s/%s was already gone", workload.pid, workload.namespace, workload.name)

    def _replace(self, workload: Workload) -> None:
        """The ReplicaSet's new pod: a new name and UID, left Pending (not bound to this node)."""
        replacement = self._api.create_pod(
            node_name=None,
            namespace=workload.namespace,
            name=f"{workload.name}-{random_suffix()}",
            labels=dict(workload.labels),
            owner_kind="ReplicaSet",
            resources={workload.resource_name: "1"},
        )
        self.replacements.append(replacement)


def _mixed_name(device: PluginDevice) -> str:
    """The device's profile as a mixed-strategy resource name (how tests ask for a device, any strategy)."""
    return mig_resource_name(device.profile) if device.profile is not None else device.resource_name


def _processes(gpu: SimGpu) -> list[SimProcess]:
    on_mig = [p for gi in gpu.gpu_instances for ci in gi.compute_instances for p in ci.processes]
    return [*gpu.processes, *on_mig]
