"""The kubelet's node status for device-plugin resources, from its device manager (nodestatus/setters.go).

- capacity[r] = the manager's capacity (healthy + unhealthy devices) for every resource it knows;
- a resource the manager dropped (endpoint stopped past its grace period) gets capacity 0, kept in
  the status "to indicate that the resource is managed by device plugin";
- allocatable[r] = capacity[r], then overridden by the manager's allocatable (its healthy devices);
- an extended resource (`domain/name`, outside kubernetes.io) in allocatable but not in capacity is
  removed from allocatable.
Other resources of the Node (cpu, memory, pods) are left as they are.

`sync()` writes only when something changed. How soon a change reaches the Node is uncertain (not
measured on a real node): the kubelet computes its status every `nodeStatusUpdateFrequency` (10 s)
and posts a changed one then. `period_s` models that: 0 (the fast suite) writes after every plugin
event, the simulated plugin calling `sync()` itself right after it registers or stops so a test
sees the new advertisement when that call returns; a period writes only on its ticks (and
`sync()` waits for the next one to do it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from migagent_sim.deviceplugin import DeviceManager, is_extended_resource_name

JsonDict = dict[str, Any]
_LOG = logging.getLogger(__name__)
_MAX_IDLE_S = 1.0


class NodeWriter(Protocol):
    """The part of FakeApiServer (or tests.realkube's RealKubeApi) the status sync uses."""

    def node(self, name: str) -> JsonDict: ...

    def update_node(self, name: str, fn: Any) -> JsonDict: ...


@dataclass(frozen=True)
class DevicePluginHost:
    """What a device plugin on this node meets: the kubelet's device manager, the directory of its
    sockets (kubelet.sock and the plugins'), and the Node status it writes."""

    manager: DeviceManager
    socket_dir: str
    status: NodeStatusSync


class NodeStatusSync:
    def __init__(
        self, api: NodeWriter, node_name: str, manager: DeviceManager, lock: threading.RLock, *, period_s: float = 0.0
    ) -> None:
        if period_s < 0:
            raise ValueError(f"node_status_period_s must be >= 0, got {period_s}")
        self.period_s = period_s
        self._api = api
        self._node = node_name
        self._manager = manager
        self._lock = lock
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def plugin_event(self) -> None:
        """The manager's on_change: something a plugin did may change the Node's status."""
        self._changed.set()

    def sync(self) -> bool:
        """Write the device-plugin resources of the Node's status if they changed; True when written
        (with a period: leave it to the next tick, False)."""
        if self.period_s > 0:
            return False
        return self.write_now()

    def write_now(self) -> bool:
        """Write the device-plugin resources of the Node's status now if they changed (a status tick).
        The manager is read under the kubelet's lock, as the write is: read before it, this tick's view
        could be older than a write the plugin's registration made while the tick waited for the
        lock, and would undo it (the agent saw its advertisement, then the Node lost a resource)."""
        with self._lock:
            capacity, allocatable, deleted = self._manager.capacity()
            status = self._api.node(self._node).get("status") or {}
            wanted = device_status(status, capacity, allocatable, deleted)
            if all(dict(status.get(f) or {}) == wanted[f] for f in ("capacity", "allocatable")):
                return False
            self._api.update_node(self._node, lambda node: node.setdefault("status", {}).update(wanted))
            return True

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=f"kubelet-status-{self._node}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._changed.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self.period_s > 0:
                self._stop.wait(self.period_s)
            else:
                expiry = self._manager.next_expiry_s()
                self._changed.wait(_MAX_IDLE_S if expiry is None else min(_MAX_IDLE_S, expiry + 0.01))
                self._changed.clear()
            if self._stop.is_set():
                return
            try:
                self.write_now()
            except Exception:  # the apiserver may be gone at teardown; the next event tries again
                _LOG.exception("node status sync failed on node %s", self._node)


def device_status(
    status: Mapping[str, Any], capacity: Mapping[str, int], allocatable: Mapping[str, int], deleted: list[str]
) -> dict[str, dict[str, str]]:
    """The Node's capacity and allocatable with the device manager's resources written in."""
    new_capacity = dict(status.get("capacity") or {})
    new_allocatable = dict(status.get("allocatable") or {})
    new_capacity.update({name: str(count) for name, count in capacity.items()})
    new_capacity.update(dict.fromkeys(deleted, "0"))
    for name in [*capacity, *deleted]:
        new_allocatable[name] = str(allocatable.get(name, new_capacity[name]))
    for name in [n for n in new_allocatable if n not in new_capacity and is_extended_resource_name(n)]:
        del new_allocatable[name]
    return {"capacity": new_capacity, "allocatable": new_allocatable}
