"""The simulated NVIDIA device plugin's container: what runs in the plugin pod in the fast suite.

Started (after `lag_s`: start-up and NVML enumeration, on the kubelet's clock) it reads FakeNvml
under its MIG strategy (kubelet_devices) and its sharing config, then serves one
SimulatedPluginServer per resource, each registered with the kubelet over the real device plugin
API; `start` returns once the kubelet has read every device list and written the Node's status.
A layout or config the real plugin refuses makes it exit instead (the pod then crash-loops, through
`on_exit`). Stopped, its servers go away and the kubelet marks their devices unhealthy.

Sharing: with a plugin ConfigMap (`config_map`), the plugin runs with the config config-manager picks
(migagent.layout.sharing.select_config). A label naming a config the map lacks leaves the plugin with
the config it has, or at pod start the one picked without the label (config-manager-init, v0.18.2,
reads before its informer synced); a default config the map lacks makes it exit.
With `gfd_labels`, the node gets GPU Feature Discovery's resource labels (gfd_labels) at each registration.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from migagent.clock import Clock
from migagent.layout.sharing import (
    NO_SHARING,
    SharingConfig,
    SharingConfigError,
    parse_plugin_config,
    select_config,
)
from migagent.layout.strategy import MigStrategy
from migagent.sim.fake_nvml import FakeNvml
from migagent_sim.cluster_api import ClusterApi
from migagent_sim.deviceplugin import SimulatedPluginServer
from migagent_sim.gfd_labels import gfd_labels
from migagent_sim.kubelet_devices import mps_refusal, read_inventory
from migagent_sim.kubelet_status import DevicePluginHost

JsonDict = dict[str, Any]
_KUBELET_WAIT_S = 10.0
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class SharingSettings:
    """Where the plugin's sharing configs come from (the GPU Operator's devicePlugin.config)."""

    config_map: tuple[str, str] | None = None
    """(namespace, name) of the ConfigMap of configs; None: the plugin runs without sharing."""
    default_config: str | None = None


class SimulatedPluginContainer:
    def __init__(
        self,
        api: ClusterApi,
        fake_nvml: FakeNvml,
        *,
        node_name: str,
        host: DevicePluginHost,
        strategy: MigStrategy,
        sharing: SharingSettings,
        lag_s: float,
        clock: Clock,
        lock: threading.RLock,
        on_exit: Callable[[str], None],
        gfd_labels: bool = False,
    ) -> None:
        if lag_s < 0:
            raise ValueError(f"plugin_lag_s must be >= 0, got {lag_s}")
        self._api = api
        self._fake = fake_nvml
        self._node = node_name
        self._manager = host.manager
        self._socket_dir = host.socket_dir
        self._status = host.status
        self.strategy = strategy
        self._settings = sharing
        self._lag_s = lag_s
        self._clock = clock
        self._lock = lock
        self._on_exit = on_exit
        self._gfd_labels = gfd_labels
        self._servers: dict[str, SimulatedPluginServer] = {}
        self._cancel = threading.Event()
        self._threads: list[threading.Thread] = []
        self._selected: str | None = None
        self.sharing: SharingConfig = NO_SHARING
        self._key: str | None = None
        """The config the plugin runs with (None: none)."""
        self.error: str | None = None
        self.config_restarts = 0

    def start(self, selected: str | None) -> None:
        """The container starts with the config `selected` names; earlier pending starts are void."""
        self._selected = selected
        self._cancel.set()
        self._cancel = threading.Event()
        if self._lag_s == 0:
            self._register()
            return
        cancel = self._cancel
        thread = threading.Thread(target=self._register_later, args=(cancel,), name="fake-device-plugin", daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def restart(self, selected: str | None) -> None:
        """SIGHUP (config-manager, or kubelet.sock created again): stop serving, start again in place."""
        self.stop()
        self.start(selected)

    def config_selected(self, selected: str | None) -> None:
        """The config-manager sidecar: with configs to choose from, switch and SIGHUP the plugin. A label
        naming a config the map lacks makes the sidecar exit and the plugin keep its config (as
        NVIDIA's do: tests/nvidia), until the label changes again."""
        self._selected = selected
        if self._settings.config_map is None:
            return
        namespace, name = self._settings.config_map
        data = (self._api.config_map(namespace, name) or {}).get("data") or {}
        key = select_config(data, selected, self._settings.default_config)
        if key is not None and key not in data:
            _LOG.warning("config-manager on %s exits: specified config %s does not exist", self._node, key)
            return
        if key == self._key:
            return  # "Already configured. Skipping update...": no SIGHUP
        self.config_restarts += 1
        self.restart(selected)

    def kubelet_restarted(self) -> None:
        """NVIDIA's plugin watches for kubelet.sock to be created and restarts its servers then."""
        if self.error is None:
            self.restart(self._selected)

    def stop(self) -> None:
        """The plugin stops: its servers go away, the kubelet marks their devices unhealthy."""
        self._cancel.set()
        servers, self._servers = self._servers, {}
        for server in servers.values():
            server.stop()
        if not self._manager.wait_until(partial(self._all_disconnected, tuple(servers)), _KUBELET_WAIT_S):
            _LOG.warning("the kubelet still lists plugin endpoints of %s", ", ".join(servers))
        self._status.sync()

    def shut_down(self) -> None:
        """The node goes away with its kubelet: stop serving without touching the Node."""
        self._cancel.set()
        servers, self._servers = self._servers, {}
        for server in servers.values():
            server.stop()

    def join(self) -> None:
        """Cancel a pending start and wait for its thread (call without holding the lock)."""
        self._cancel.set()
        for thread in self._threads:
            thread.join(timeout=5)

    def _register_later(self, cancel: threading.Event) -> None:
        if self._clock.wait(cancel, self._lag_s):
            return
        with self._lock:
            if not cancel.is_set():
                try:
                    self._register()
                except Exception:
                    _LOG.exception("fake device plugin failed to register on node %s", self._node)

    def _register(self) -> None:
        inventory = read_inventory(self._fake, self.strategy)
        try:
            self.sharing = self._load_sharing()
            self.error = inventory.plugin_error or mps_refusal(self.sharing, self.strategy, inventory)
        except SharingConfigError as exc:
            self.error = str(exc)
        if self.error is not None:
            _LOG.warning("fake device plugin on %s exits: %s", self._node, self.error)
            self._on_exit(self.error)
            return
        self._serve(inventory.resources(self.sharing))
        if self._gfd_labels:
            labels = gfd_labels(self._fake, self.strategy, self.sharing)
            self._api.update_node(self._node, lambda node: node["metadata"].setdefault("labels", {}).update(labels))

    def _serve(self, resources: Mapping[str, tuple[str, ...]]) -> None:
        fail_greater_than_one = self.sharing.fail_requests_greater_than_one
        for name, ids in resources.items():
            before = self._manager.listed(name)
            server = SimulatedPluginServer(
                name, ids, socket_dir=self._socket_dir, fail_requests_greater_than_one=fail_greater_than_one
            )
            server.start()
            self._servers[name] = server
            if not self._manager.wait_until(partial(self._listed_since, name, before), _KUBELET_WAIT_S):
                _LOG.warning("the kubelet did not read the device list of %s within %ss", name, _KUBELET_WAIT_S)
        self._status.sync()

    def _listed_since(self, resource: str, lists_before: int) -> bool:
        return self._manager.listed(resource) > lists_before

    def _all_disconnected(self, resources: tuple[str, ...]) -> bool:
        return not any(self._manager.connected_sockets(name) for name in resources)

    def _load_sharing(self) -> SharingConfig:
        """The sharing config the plugin starts with: the ConfigMap's key the node label selects. A label
        naming a config the map lacks leaves the plugin with the config picked without the label (NVIDIA's
        config-manager-init reads the label before its informer synced, so it always falls back first;
        the sidecar then exits on the missing config: tests/nvidia)."""
        if self._settings.config_map is None:
            return NO_SHARING
        namespace, name = self._settings.config_map
        found = self._api.config_map(namespace, name)
        data: dict[str, str] = (found or {}).get("data") or {}
        key = select_config(data, self._selected, self._settings.default_config)
        if key is not None and key not in data:
            _LOG.warning("config-manager on %s: specified config %s does not exist", self._node, key)
            key = select_config(data, None, self._settings.default_config)
        self._key = key
        if key is None:
            return NO_SHARING
        if key not in data:
            raise SharingConfigError(f"config-manager: no config {key!r} in ConfigMap {namespace}/{name}")
        return parse_plugin_config(data[key], where=f"ConfigMap {namespace}/{name} config {key}")
