"""The simulated kubelet's node status: a tick never writes a view older than a write it waited behind."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from migagent.clock import FakeClock
from migagent_sim.deviceplugin import DeviceManager
from migagent_sim.kubelet_status import NodeStatusSync

JsonDict = dict[str, Any]
RESOURCE = "nvidia.com/mig-1g.10gb"


class _Node:
    """The one Node the sync writes (NodeWriter)."""

    def __init__(self) -> None:
        self.value: JsonDict = {"metadata": {"name": "gpu-node-1"}, "status": {}}

    def node(self, name: str) -> JsonDict:
        return self.value

    def update_node(self, name: str, fn: Callable[[JsonDict], None]) -> JsonDict:
        fn(self.value)
        return self.value


class _Endpoint:
    """What the manager keeps of a plugin's endpoint (PluginEndpoint): only its socket is read here."""

    socket_path = "/dp/nvidia-mig-1g.10gb.sock"
    preferred_allocation_available = False
    pre_start_required = False

    def preferred_allocation(self, available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
        return []

    def allocate(self, device_ids: Sequence[str]) -> dict[str, str]:
        return {}

    def pre_start(self, device_ids: Sequence[str]) -> None:
        return None


class _WaitingLock:
    """The kubelet's lock, saying when another thread has started to wait for it."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.wanted = threading.Event()

    def __enter__(self) -> bool:
        if not self.lock.acquire(blocking=False):
            self.wanted.set()
            self.lock.acquire()
        return True

    def __exit__(self, *_exc: object) -> None:
        self.lock.release()


def test_a_tick_waiting_for_the_lock_writes_what_the_manager_holds_then_not_what_it_held_before() -> None:
    manager = DeviceManager(clock=FakeClock())
    node = _Node()
    lock = _WaitingLock()
    sync = NodeStatusSync(node, "gpu-node-1", manager, lock)  # type: ignore[arg-type]  # a lock that tells
    # The old plugin's 14 devices, its stream ended: capacity 14, none allocatable (the tick's stale view).
    manager.connected(RESOURCE, _Endpoint())
    manager.devices_listed(RESOURCE, [(f"MIG-old-{i}", "Healthy") for i in range(14)])
    manager.disconnected(RESOURCE, _Endpoint.socket_path)
    with lock:  # the plugin's registration holds it
        tick = threading.Thread(target=sync.write_now, name="status-tick")
        tick.start()
        assert lock.wanted.wait(timeout=60), "the tick never asked for the lock"
        manager.connected(RESOURCE, _Endpoint())
        manager.devices_listed(RESOURCE, [(f"MIG-{i}", "Healthy") for i in range(4)])
        assert sync.write_now()
    tick.join(timeout=60)
    assert not tick.is_alive()
    assert node.value["status"]["allocatable"][RESOURCE] == "4"
    assert node.value["status"]["capacity"][RESOURCE] == "4"
