"""The kubelet's device manager (k8s.io/kubernetes v1.37.2 pkg/kubelet/cm/devicemanager), as far as a
node's advertisement and its pods' devices go. Plugins reach it through the Registration server
(registration.py) and the kubelet's client of each plugin (endpoint.py); the simulated plugin and
NVIDIA's real one take that same path.

What it keeps per resource, and what the Node shows (`capacity()`, read by the node status sync):
- each ListAndWatch response replaces the resource's healthy and unhealthy device sets wholesale;
  capacity = healthy + unhealthy, allocatable = healthy;
- the last endpoint of a resource going away (its ListAndWatch stream ends) moves every device to
  unhealthy and stamps the stop time: allocatable 0, capacity kept;
- a resource whose endpoint has been stopped longer than `stop_grace_period_s` (endpointStopGracePeriod,
  5 minutes) is dropped and reported as deleted: the node status then writes capacity 0 for it;
- a second registration from a socket already connected is refused ("device plugin already
  connected"), as PluginConnected does; a new socket for the same resource becomes its endpoint.
Pods get devices through `allocate` (devicesToAllocate + the plugin's GetPreferredAllocation,
Allocate and PreStartContainer); `release` frees a pod's devices when it is gone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from migagent.clock import Clock, SystemClock

_REAL_TIME = SystemClock()

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
STOP_GRACE_PERIOD_S = 300.0
"""endpointStopGracePeriod (pkg/kubelet/cm/devicemanager/types.go)."""


class AllocationError(RuntimeError):
    """The kubelet cannot admit the container's devices (the pod fails with UnexpectedAdmissionError)."""


class RegistrationError(RuntimeError):
    """The kubelet refuses a plugin's registration (the plugin's Register call fails with this message)."""


class PluginEndpoint(Protocol):
    """What the manager needs of a connected plugin (endpoint.PluginClient over gRPC)."""

    @property
    def socket_path(self) -> str: ...

    @property
    def preferred_allocation_available(self) -> bool: ...

    @property
    def pre_start_required(self) -> bool: ...

    def preferred_allocation(self, available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]: ...

    def allocate(self, device_ids: Sequence[str]) -> dict[str, str]:
        """The container's environment from the plugin's Allocate answer; raises AllocationError."""
        ...

    def pre_start(self, device_ids: Sequence[str]) -> None: ...


@dataclass(frozen=True)
class PodDeviceEntry:
    """Devices one container of one pod holds (what PodResources List reports)."""

    pod_uid: str
    container: str
    resource: str
    device_ids: tuple[str, ...]
    envs: Mapping[str, str] = field(default_factory=dict)


@dataclass
class _Resource:
    endpoints: dict[str, PluginEndpoint] = field(default_factory=dict)
    """Connected endpoints by socket path (endpointStore)."""
    primary: PluginEndpoint | None = None
    stopped_at: float | None = None
    healthy: set[str] = field(default_factory=set)
    unhealthy: set[str] = field(default_factory=set)
    order: tuple[str, ...] = ()
    """The ids in the order the plugin last listed them."""
    lists: int = 0
    """ListAndWatch responses received so far (what waiters count)."""


class DeviceManager:
    def __init__(
        self,
        *,
        clock: Clock | None = None,
        stop_grace_period_s: float = STOP_GRACE_PERIOD_S,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        self.stop_grace_period_s = stop_grace_period_s
        self.on_change = on_change or (lambda: None)
        """Called after every plugin event (the kubelet's node status sync listens)."""
        self._resources: dict[str, _Resource] = {}
        self._pods: dict[tuple[str, str, str], PodDeviceEntry] = {}
        self._changed = threading.Condition()
        self.events = 0
        """Plugin events so far (connections, lists, disconnections)."""
        self._last_event_at = _REAL_TIME.monotonic()

    # --- what plugins do (PluginConnected, PluginListAndWatchReceiver, PluginDisconnected) ----------

    def connected(self, resource: str, endpoint: PluginEndpoint) -> None:
        with self._changed:
            state = self._resources.setdefault(resource, _Resource())
            if endpoint.socket_path in state.endpoints:
                raise RegistrationError(f"device plugin already connected: {endpoint.socket_path}")
            state.endpoints[endpoint.socket_path] = endpoint
            state.primary, state.stopped_at = endpoint, None
            self._event()

    def devices_listed(self, resource: str, devices: Iterable[tuple[str, str]]) -> None:
        """One ListAndWatch response: (device id, health) pairs replace what the resource had."""
        with self._changed:
            state = self._resources.setdefault(resource, _Resource())
            listed = list(devices)
            state.healthy = {device for device, health in listed if health == HEALTHY}
            state.unhealthy = {device for device, health in listed if health != HEALTHY}
            state.order = tuple(device for device, _ in listed)
            state.lists += 1
            self._event()
        self.on_change()

    def disconnected(self, resource: str, socket_path: str) -> None:
        with self._changed:
            state = self._resources.get(resource)
            if state is None or socket_path not in state.endpoints:
                return
            del state.endpoints[socket_path]
            if state.endpoints:  # another endpoint of the resource takes over
                state.primary = next(iter(state.endpoints.values()))
            else:
                state.stopped_at = self._clock.monotonic()
                state.unhealthy |= state.healthy
                state.healthy = set()
            self._event()
        self.on_change()

    def restored(self, resources: Iterable[str]) -> None:
        """The kubelet (re)started: every resource its checkpoint names reads 0 until its plugin
        registers again (readCheckpoint: a stopped endpoint with no devices)."""
        with self._changed:
            now = self._clock.monotonic()
            for name in resources:
                self._resources[name] = _Resource(stopped_at=now)
            self._changed.notify_all()
        self.on_change()

    # --- what the node status and PodResources read ------------------------------------------------

    def capacity(self) -> tuple[dict[str, int], dict[str, int], list[str]]:
        """(capacity, allocatable, deleted) as GetCapacity: resources past their grace period are dropped."""
        capacity: dict[str, int] = {}
        allocatable: dict[str, int] = {}
        with self._changed:
            now = self._clock.monotonic()
            deleted = [name for name, s in self._resources.items() if self._expired(s, now)]
            for name in deleted:
                del self._resources[name]
            for name, state in self._resources.items():
                capacity[name] = len(state.healthy) + len(state.unhealthy)
                allocatable[name] = len(state.healthy)
        return capacity, allocatable, sorted(deleted)

    def next_expiry_s(self) -> float | None:
        """Seconds until a stopped resource's grace period ends (None: none is pending)."""
        with self._changed:
            now = self._clock.monotonic()
            pending = [s.stopped_at + self.stop_grace_period_s - now for s in self._resources.values() if s.stopped_at]
        return max(0.0, min(pending)) if pending else None

    def healthy_devices(self) -> dict[str, tuple[str, ...]]:
        """What PodResources GetAllocatableResources answers: each resource's healthy device ids."""
        with self._changed:
            resources = sorted(self._resources.items())
            return {name: tuple(d for d in s.order if d in s.healthy) for name, s in resources if s.healthy}

    def known_resources(self) -> tuple[str, ...]:
        with self._changed:
            return tuple(sorted(self._resources))

    def listed(self, resource: str) -> int:
        with self._changed:
            state = self._resources.get(resource)
            return state.lists if state is not None else 0

    def connected_sockets(self, resource: str) -> tuple[str, ...]:
        with self._changed:
            state = self._resources.get(resource)
            return tuple(state.endpoints) if state is not None else ()

    def wait_quiet(self, quiet_s: float, timeout_s: float, *, after: int = 0) -> bool:
        """Wait (real time) until some plugin event numbered above `after` happened and then none for
        `quiet_s` (a plugin that registers its resources one after the other is done); False on timeout."""
        deadline = _REAL_TIME.monotonic() + timeout_s
        with self._changed:
            while True:
                now = _REAL_TIME.monotonic()
                quiet_for = now - self._last_event_at
                if self.events > after and quiet_for >= quiet_s:
                    return True
                if now >= deadline:
                    return False
                wait = quiet_s - quiet_for if self.events > after else quiet_s
                self._changed.wait(min(max(wait, 0.01), deadline - now))

    def _event(self) -> None:
        self.events += 1
        self._last_event_at = _REAL_TIME.monotonic()
        self._changed.notify_all()

    def wait_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Wait (real time) until `condition()` holds after a plugin event; False on timeout."""
        with self._changed:
            return self._changed.wait_for(condition, timeout=timeout_s)

    def pod_devices(self) -> list[PodDeviceEntry]:
        with self._changed:
            return list(self._pods.values())

    # --- pods (devicesToAllocate, allocateContainerResources, UpdateAllocatedDevices) --------------

    def allocate(
        self, pod_uid: str, container: str, resource: str, count: int, *, choose: Sequence[str] = ()
    ) -> PodDeviceEntry:
        """Give `count` healthy free devices of `resource` to the container, through the plugin.

        The plugin's GetPreferredAllocation picks among the free devices (when it offers one) unless
        `choose` names them (a test placing a pod on one device; the real kubelet has no such input).
        """
        with self._changed:
            state = self._resources.get(resource)
            endpoint = state.primary if state is not None and state.stopped_at is None else None
            if state is None or endpoint is None:
                raise AllocationError(f"cannot allocate unregistered device {resource}")
            if not state.healthy:
                raise AllocationError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
            held = {d for e in self._pods.values() if e.resource == resource for d in e.device_ids}
            available = [d for d in state.order if d in state.healthy and d not in held]
        if len(available) < count:
            raise AllocationError(
                f"requested number of devices unavailable for {resource}."
                f" Requested: {count}, Available: {len(available)}"
            )
        devices = self._pick(endpoint, available, count, choose)
        envs = endpoint.allocate(devices)
        if endpoint.pre_start_required:
            endpoint.pre_start(devices)
        entry = PodDeviceEntry(pod_uid, container, resource, tuple(devices), envs)
        with self._changed:
            self._pods[(pod_uid, container, resource)] = entry
        return entry

    def release(self, pod_uid: str) -> None:
        with self._changed:
            for key in [k for k in self._pods if k[0] == pod_uid]:
                del self._pods[key]

    @staticmethod
    def _pick(endpoint: PluginEndpoint, available: list[str], count: int, choose: Sequence[str]) -> list[str]:
        if choose:
            missing = [d for d in choose if d not in available]
            if missing or len(choose) != count:
                raise AllocationError(f"devices {list(choose)} are not {count} free healthy devices of {available}")
            return list(choose)
        if count < len(available) and endpoint.preferred_allocation_available:
            preferred = [d for d in endpoint.preferred_allocation(available, [], count) if d in available]
            chosen = list(dict.fromkeys(preferred))[:count]
            return chosen + [d for d in available if d not in chosen][: count - len(chosen)]
        return available[:count]

    def _expired(self, state: _Resource, now: float) -> bool:
        return state.stopped_at is not None and now - state.stopped_at > self.stop_grace_period_s
