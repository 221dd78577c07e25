"""The device plugin as the fake kubelet sees it: its pod, and what it makes the node advertise.

- "gpu-operator" mode: the plugin pod exists iff the node label `nvidia.com/gpu.deploy.device-plugin`
  is "true" (the operator's DaemonSet nodeSelector); any other value removes it.
- "daemonset" mode: a deleted plugin pod is recreated at once with a new name and UID.
- "absent": no device plugin on the node at all (a node served by the DRA driver only).
- "node-label" mode: a standalone plugin DaemonSet patched with a node affinity on that label: the
  pod runs unless the label is "false" or "paused-for-mig-change" (absent runs), and is recreated
  when deleted.

Sharing (time-slicing): with a plugin ConfigMap (`config_map`, as the GPU Operator's
ClusterPolicy devicePlugin.config or the plugin chart's config), the plugin runs with the config the
node label `nvidia.com/device-plugin.config` names, else `default_config`, else the map's only key;
replicated resources register `replicas` ids per device, renamed as the config says
(migagent.layout.sharing). A change of that label restarts the plugin in place, as its
config-manager sidecar does with SIGHUP: same pod, resources drop to 0 and come back under the new
config. A label naming a config the map lacks makes the plugin exit (CrashLoopBackOff), as its
config-manager refuses it. With `gfd_labels`, the node gets GPU Feature Discovery's
`nvidia.com/<resource>.replicas|.product|.sharing-strategy|.count` labels at each registration.

Node status follows the kubelet's device manager (reference kubernetes.md §5.3), simplified:
- plugin pod gone (or the plugin exited): every plugin resource's allocatable reads "0", capacity is kept;
- plugin (re)started: after `lag_s` (start-up + registration + node-status sync) capacity and
  allocatable are recomputed from FakeNvml; resources it no longer offers read "0" in both at once
  (the real kubelet keeps their capacity for a 5-minute grace period first).
"""

from __future__ import annotations

import logging
import random
import string
import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal

from migagent.clock import Clock
from migagent.layout.sharing import NO_SHARING, SharingConfig, SharingConfigError, parse_plugin_config
from migagent.layout.strategy import MigStrategy
from migagent.sim.fake_nvml import FakeNvml
from migagent_sim.apiserver.errors import ApiError
from migagent_sim.cluster_api import ClusterApi
from migagent_sim.kubelet_devices import DeviceInventory, is_plugin_resource, read_inventory

PluginMode = Literal["gpu-operator", "daemonset", "node-label", "absent"]
PLUGIN_MODES: tuple[PluginMode, ...] = ("gpu-operator", "daemonset", "node-label", "absent")
# What a DaemonSet patched as deploy/overlays/standalone says keeps it off a node (node affinity NotIn).
NODE_LABEL_OFF = ("false", "paused-for-mig-change")
DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
PLUGIN_POD_PREFIX = "nvidia-device-plugin-daemonset-"
JsonDict = dict[str, Any]
_LOG = logging.getLogger(__name__)


class FakeDevicePlugin:
    """Keeps the plugin pod and the node's plugin resources in step with the mode, labels and FakeNvml.

    Every method runs under the kubelet's lock (`lock`), which the advertisement thread takes too.
    """

    def __init__(
        self,
        api: ClusterApi,
        fake_nvml: FakeNvml,
        *,
        node_name: str,
        namespace: str,
        labels: Mapping[str, str],
        mode: PluginMode,
        lag_s: float,
        clock: Clock,
        lock: threading.RLock,
        strategy: MigStrategy = MigStrategy.MIXED,
        daemonset: str = "nvidia-device-plugin-daemonset",
        config_map: tuple[str, str] | None = None,
        default_config: str | None = None,
        gfd_labels: bool = False,
    ) -> None:
        if mode not in PLUGIN_MODES:
            raise ValueError(f"plugin_mode {mode!r} is not valid; valid modes: {', '.join(PLUGIN_MODES)}")
        if lag_s < 0:
            raise ValueError(f"plugin_lag_s must be >= 0, got {lag_s}")
        self._api = api
        self._fake = fake_nvml
        self._node = node_name
        self._namespace = namespace
        self._labels = dict(labels)
        self._mode = mode
        self.strategy = strategy
        self._daemonset = daemonset
        self._lag_s = lag_s
        self._clock = clock
        self._lock = lock
        self.pod: JsonDict | None = None
        # What the running plugin registered (empty until it has, and while it is down).
        self.registered: dict[str, tuple[str, ...]] = {}
        self.error: str | None = None
        self._cancel = threading.Event()
        self._threads: list[threading.Thread] = []
        self._config_map = config_map
        self._default_config = default_config
        self._gfd_labels = gfd_labels
        self._selected: str | None = None
        self.sharing: SharingConfig = NO_SHARING
        self.config_restarts = 0
        """How often the config manager restarted the plugin in place (label changes)."""

    # --- pod lifecycle ---------------------------------------------------------------------------

    def adopt_or_sync(self, node: JsonDict) -> None:
        """At kubelet start: take over a plugin pod already on the node, else behave as on any node change."""
        self._selected = node["metadata"].get("labels", {}).get(CONFIG_LABEL)
        for pod in self._api.pods(self._node):
            if pod["metadata"].get("namespace") == self._namespace and self._is_plugin_labelled(pod):
                self.pod = pod
                self._start_registration()
                break
        self.node_changed(node)

    def node_changed(self, node: JsonDict) -> None:
        selected = node["metadata"].get("labels", {}).get(CONFIG_LABEL)
        if selected != self._selected:
            self._selected = selected
            if self.pod is not None and self._config_map is not None:  # config-manager: SIGHUP, same pod
                self.config_restarts += 1
                self._disconnect()
                self._start_registration()
        wanted = self._should_run(node)
        if wanted and self.pod is None:
            self._create_pod()
        elif not wanted and self.pod is not None:
            pod, self.pod = self.pod, None
            self._disconnect()
            self._delete(pod)

    def pod_deleted(self, pod: JsonDict) -> bool:
        """True when `pod` was the plugin pod (then recreated where its controller would)."""
        if self.pod is None or pod["metadata"].get("uid") != self.pod["metadata"].get("uid"):
            return False
        self.pod = None
        self._disconnect()
        # The node write in _disconnect re-enters node_changed, which may already have recreated the pod.
        if self.pod is None and self._should_run(self._api.node(self._node)):
            self._create_pod()
        return True

    def stop(self) -> None:
        """Cancel a pending advertisement and wait for its thread (call without holding the lock)."""
        self._cancel.set()
        for thread in self._threads:
            thread.join(timeout=5)

    def _should_run(self, node: JsonDict) -> bool:
        if self._mode == "absent":  # no device plugin on the node (the DRA driver serves it)
            return False
        if self._mode == "daemonset":
            return True
        if self._mode == "node-label":
            return node["metadata"].get("labels", {}).get(DEPLOY_LABEL) not in NODE_LABEL_OFF
        return bool(node["metadata"].get("labels", {}).get(DEPLOY_LABEL) == "true")

    def _is_plugin_labelled(self, pod: JsonDict) -> bool:
        labels = pod["metadata"].get("labels") or {}
        return all(labels.get(key) == value for key, value in self._labels.items())

    def _create_pod(self) -> None:
        pod = self._api.create_pod(
            node_name=self._node,
            namespace=self._namespace,
            name=PLUGIN_POD_PREFIX + random_suffix(),
            labels=self._labels,
            owner_kind="DaemonSet",
            owner_name=self._daemonset,
        )
        self.pod = pod
        self._start_registration()

    def _delete(self, pod: JsonDict) -> None:
        metadata = pod["metadata"]
        try:
            self._api.delete_pod(metadata["namespace"], metadata["name"])
        except ApiError as exc:
            if exc.code != 404:
                raise
            # someone else deleted it first; pod_deleted no longer matches it, so nothing else to do

    # --- node status -----------------------------------------------------------------------------

    def _start_registration(self) -> None:
        """The plugin enumerates NVML and registers after `lag_s`; earlier pending registrations are void."""
        self._cancel.set()
        self._cancel = threading.Event()
        uid = self.pod["metadata"]["uid"] if self.pod else None
        if self._lag_s == 0:
            self._register(uid)
            return
        cancel = self._cancel
        thread = threading.Thread(
            target=self._register_later, args=(uid, cancel), name="fake-device-plugin", daemon=True
        )
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _register_later(self, uid: str | None, cancel: threading.Event) -> None:
        if self._clock.wait(cancel, self._lag_s):
            return
        with self._lock:
            if not cancel.is_set():
                try:
                    self._register(uid)
                except Exception:
                    _LOG.exception("fake device plugin failed to register on node %s", self._node)

    def _register(self, uid: str | None) -> None:
        if self.pod is None or self.pod["metadata"]["uid"] != uid:
            return
        inventory: DeviceInventory = read_inventory(self._fake, self.strategy)
        try:
            self.sharing = self._load_sharing()
            self.error = inventory.plugin_error
        except SharingConfigError as exc:
            self.error = str(exc)
        if self.error is not None:
            _LOG.warning("fake device plugin on %s exits: %s", self._node, self.error)
            self.registered = {}
            metadata = self.pod["metadata"]
            self.pod = self._api.update_pod(metadata["namespace"], metadata["name"], _crash_looping(self.error))
            return
        self.registered = inventory.resources(self.sharing)
        counts = {name: str(len(ids)) for name, ids in self.registered.items()}
        labels = gfd_labels(inventory.counts(), self.sharing) if self._gfd_labels else {}
        self._api.update_node(self._node, lambda node: _publish(node, counts, labels))

    def _load_sharing(self) -> SharingConfig:
        """The sharing config the plugin starts with: the ConfigMap's key the node label selects."""
        if self._config_map is None:
            return NO_SHARING
        namespace, name = self._config_map
        found = self._api.config_map(namespace, name)
        data: dict[str, str] = (found or {}).get("data") or {}
        key = self._selected or self._default_config or (next(iter(data)) if len(data) == 1 else None)
        if key is None:
            return NO_SHARING
        if key not in data:
            raise SharingConfigError(f"config-manager: no config {key!r} in ConfigMap {namespace}/{name}")
        return parse_plugin_config(data[key], where=f"ConfigMap {namespace}/{name} config {key}")

    def advertised_name(self, resource: str) -> str:
        """The name the running plugin advertises `resource` under (renamed by its sharing config)."""
        return self.sharing.advertised(resource).name

    def _disconnect(self) -> None:
        self._cancel.set()
        self.registered = {}
        self._api.update_node(self._node, _zero_allocatable)


def random_suffix() -> str:
    """Five characters, as a controller's generated pod name ends."""
    return "".join(random.choices(string.ascii_lowercase + string.digits, k=5))


def _crash_looping(message: str) -> Callable[[JsonDict], None]:
    """What the pod looks like while its plugin keeps exiting: not ready, waiting in CrashLoopBackOff."""

    def mark(pod: JsonDict) -> None:
        status = pod.setdefault("status", {})
        for condition in status.get("conditions", []):
            if condition.get("type") in ("Ready", "ContainersReady"):
                condition["status"] = "False"
        for container in status.get("containerStatuses", []):
            container.update(ready=False, started=False, restartCount=int(container.get("restartCount", 0)) + 1)
            container["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}

    return mark


def gfd_labels(counts: Mapping[str, int], sharing: SharingConfig) -> dict[str, str]:
    """What GPU Feature Discovery labels for each resource (internal/lm/resource.go baseLabeler): its
    replicas, its sharing strategy, and a product name ending -SHARED when replicated but not renamed."""
    labels: dict[str, str] = {}
    for resource, count in counts.items():
        advertised = sharing.advertised(resource)
        shared = advertised.replicas > 1
        suffix = "-SHARED" if shared and advertised.name == resource else ""
        strategy = ("time-slicing" if sharing.kind == "timeSlicing" else sharing.kind) if shared else "none"
        labels.update(
            {
                f"{resource}.count": str(count),
                f"{resource}.replicas": str(advertised.replicas),
                f"{resource}.sharing-strategy": strategy,
                f"{resource}.product": "NVIDIA-" + resource.removeprefix("nvidia.com/").upper() + suffix,
            }
        )
    return labels


def _publish(node: JsonDict, counts: Mapping[str, str], labels: Mapping[str, str] | None = None) -> None:
    if labels:
        node["metadata"].setdefault("labels", {}).update(labels)
    status = node.setdefault("status", {})
    for field in ("capacity", "allocatable"):
        values = status.setdefault(field, {})
        for name in [n for n in values if is_plugin_resource(n) and n not in counts]:
            values[name] = "0"
        values.update(counts)


def _zero_allocatable(node: JsonDict) -> None:
    allocatable = node.setdefault("status", {}).setdefault("allocatable", {})
    for name in [n for n in allocatable if is_plugin_resource(n)]:
        allocatable[name] = "0"
