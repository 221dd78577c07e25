"""`FakeApiServer`: a real HTTP/1.1 kube-apiserver double on loopback, plus a state API for tests and the sim.

Everything the HTTP side serves lives in one thread-safe `Store`; the state API below writes through the
same store, so each change bumps the resourceVersion and reaches open watches and listeners like an API
write would. See docs/kubernetes.md §1-§3 for the behaviour reproduced.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Unpack

from migagent.clock import Clock, SystemClock
from migagent_sim.apiserver.dispatch import Dispatcher, WatchSettings
from migagent_sim.apiserver.disruption import BudgetRule, DisruptionController
from migagent_sim.apiserver.faults import FaultInjector, RecordedRequest, RequestLog
from migagent_sim.apiserver.handler import ApiRequestHandler, LoopbackHttpServer
from migagent_sim.apiserver.objects import (
    PodArgs,
    daemonset_status,
    node_object,
    pdb_object,
    pdb_status,
    pod_object,
    timestamp,
)
from migagent_sim.apiserver.routing import (
    CLUSTER_POLICIES,
    CONFIGMAPS,
    CORE_EVENTS,
    DAEMONSETS,
    EVENTS_V1,
    LEASES,
    NODES,
    PDBS,
    PODS,
    RESOURCESLICES,
)
from migagent_sim.apiserver.store import Store, StoredEvent
from migagent_sim.apiserver.terminating import PodEnds, Terminator

if TYPE_CHECKING:
    from migagent_sim.apiserver.access import AccessControl
    from migagent_sim.apiserver.rbac import UserInfo

JsonDict = dict[str, Any]


@dataclass(frozen=True)
class ServerContext:
    dispatcher: Dispatcher
    faults: FaultInjector
    requests: RequestLog
    access: AccessControl | None = None


class FakeApiServer:
    def __init__(
        self,
        *,
        clock: Clock | None = None,
        bookmark_interval_s: float = 60.0,
        default_watch_timeout_s: float = 1800.0,
        history_limit: int = 10_000,
        access: AccessControl | None = None,
        grace_scale: float = 1.0,
    ) -> None:
        """`clock` stamps creation/deletion times; watch timeouts and bookmarks always run on real time.

        With `access`, every request must carry a token from `issue_token` and pass its RBAC, and Node
        writes pass its admission policies (access.py); without, every request is served.
        A deleted or evicted pod stays Terminating for its grace period times `grace_scale`
        (terminating.py); bookmarks go out every `bookmark_interval_s` (the apiserver: about a minute)."""
        self._clock = clock or SystemClock()
        self._store = Store(clock=self._clock, history_limit=history_limit)
        self._faults = FaultInjector()
        self._requests = RequestLog()
        settings = WatchSettings(default_timeout_s=default_watch_timeout_s, bookmark_interval_s=bookmark_interval_s)
        self._pod_ends = PodEnds(self._store)
        self._terminator = Terminator(self._store, self._pod_ends, grace_scale=grace_scale)
        self._disruption = DisruptionController(self._store)
        dispatcher = Dispatcher(self._store, self._clock, settings, admission=access, terminator=self._terminator)
        self._access = access
        self._context = ServerContext(dispatcher, self._faults, self._requests, access)
        self._http: LoopbackHttpServer | None = None
        self._thread: threading.Thread | None = None
        self._url = ""

    # --- lifecycle

    def start(self) -> str:
        """Listen on an ephemeral loopback port; returns the base URL `http://127.0.0.1:<port>`."""
        if self._http is not None:
            return self._url
        handler = type("BoundApiRequestHandler", (ApiRequestHandler,), {"context": self._context})
        self._http = LoopbackHttpServer(handler)
        port = self._http.server_address[1]
        self._url = f"http://127.0.0.1:{port}"
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-apiserver", daemon=True
        )
        self._thread.start()
        return self._url

    def stop(self) -> None:
        if self._http is None:
            return
        self._store.drop_subscriptions()
        self._http.shutdown()
        self._http.close_connections()
        self._http.server_close()
        if self._thread is not None:
            self._thread.join()
        self._terminator.stop()  # last: a request still in flight may have scheduled a pod's removal
        self._http = None
        self._thread = None

    @property
    def url(self) -> str:
        return self._url

    def __enter__(self) -> FakeApiServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- access control

    @property
    def access(self) -> AccessControl | None:
        return self._access

    def issue_token(self, user: UserInfo) -> str:
        """A bearer token for `user`; only a server with access control issues (and checks) them."""
        if self._access is None:
            raise RuntimeError("this fake apiserver runs without access control: construct it with access=...")
        return self._access.issue_token(user)

    # --- nodes

    def add_node(
        self,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        allocatable: Mapping[str, str | int] | None = None,
        capacity: Mapping[str, str | int] | None = None,
    ) -> JsonDict:
        node = node_object(name, labels=labels, allocatable=allocatable, capacity=capacity, wall_s=self._clock.wall())
        return self._store.create(NODES, node)

    def node(self, name: str) -> JsonDict:
        """A deep copy of the stored Node; KeyError when there is none."""
        found = self._store.get(NODES, "", name)
        if found is None:
            raise KeyError(f"the fake apiserver has no node {name!r}; add it with add_node({name!r})")
        return found

    def update_node(self, name: str, fn: Callable[[JsonDict], None]) -> JsonDict:
        """Edit the stored Node in place through `fn` (bumps the resourceVersion, emits MODIFIED).

        `fn` runs under the store lock: it must not call back into this server.
        """
        return self._store.update(NODES, "", name, _in_place(fn))

    # --- pods

    def add_pod(self, pod: JsonDict) -> JsonDict:
        """Store a complete Pod object (namespace defaults to "default"); returns it with uid and RV filled."""
        metadata = pod.get("metadata") or {}
        if not metadata.get("name") or not (pod.get("spec") or {}).get("containers"):
            raise ValueError("add_pod needs metadata.name and spec.containers (use create_pod for a ready-made pod)")
        pod = {**pod, "metadata": {**metadata, "namespace": metadata.get("namespace") or "default"}}
        return self._store.create(PODS, {"apiVersion": "v1", "kind": "Pod", **pod})

    def create_pod(self, **pod: Unpack[PodArgs]) -> JsonDict:
        """A pod on `node_name` (Running) or unscheduled (Pending); `resources` become the container's
        limits and requests (`objects.PodArgs`)."""
        return self._store.create(PODS, pod_object(wall_s=self._clock.wall(), **pod))

    def pod(self, namespace: str, name: str) -> JsonDict | None:
        return self._store.get(PODS, namespace, name)

    def pods(self, node_name: str | None = None) -> list[JsonDict]:
        items, _ = self._store.list_objects(PODS)
        return [p for p in items if node_name is None or (p.get("spec") or {}).get("nodeName") == node_name]

    def update_pod(self, namespace: str, name: str, fn: Callable[[JsonDict], None]) -> JsonDict:
        """Edit a stored Pod in place (same rules as update_node)."""
        return self._store.update(PODS, namespace, name, _in_place(fn))

    def delete_pod(self, namespace: str, name: str) -> JsonDict:
        """Remove a pod as a completed graceful delete would: on_pod_deleted listeners (its containers stop),
        then the DELETED watch event."""
        wall = self._clock.wall()
        current = self._store.get(PODS, namespace, name)
        if current is not None:
            self._pod_ends.end(current)

        def stamp(pod: JsonDict) -> None:
            pod["metadata"].setdefault("deletionTimestamp", timestamp(wall))
            pod["metadata"].setdefault("deletionGracePeriodSeconds", 0)

        return self._store.delete(PODS, namespace, name, finalize=stamp)

    # --- ConfigMaps, PDBs, DaemonSets, events

    def add_pdb(
        self, namespace: str, name: str, *, match_labels: Mapping[str, str], disruptions_allowed: int
    ) -> JsonDict:
        pdb = pdb_object(namespace, name, match_labels=match_labels, disruptions_allowed=disruptions_allowed)
        return self._store.create(PDBS, pdb)

    def add_managed_pdb(
        self,
        namespace: str,
        name: str,
        *,
        match_labels: Mapping[str, str],
        min_available: int | None = None,
        max_unavailable: int | None = None,
        replicas: int | None = None,
    ) -> JsonDict:
        """A PDB whose status the fake disruption controller keeps (disruption.py): evictions consume
        disruptionsAllowed and Ready replacements give it back. Give exactly one of min_available and
        max_unavailable (with max_unavailable, the owner's `replicas`)."""
        if (min_available is None) == (max_unavailable is None) or (max_unavailable is not None and replicas is None):
            raise ValueError("add_managed_pdb needs min_available, or max_unavailable with replicas")
        pdb = pdb_object(namespace, name, match_labels=match_labels, disruptions_allowed=0)
        pdb["spec"].pop("minAvailable", None)
        if min_available is not None:
            pdb["spec"]["minAvailable"] = min_available
        else:
            pdb["spec"]["maxUnavailable"] = max_unavailable
        self._store.create(PDBS, pdb)
        return self._disruption.manage(namespace, name, BudgetRule(min_available, max_unavailable, replicas))

    def pdb(self, namespace: str, name: str) -> JsonDict:
        """A deep copy of the stored PodDisruptionBudget; KeyError when there is none."""
        found = self._store.get(PDBS, namespace, name)
        if found is None:
            raise KeyError(f"the fake apiserver has no PodDisruptionBudget {namespace}/{name}")
        return found

    def update_pdb(self, namespace: str, name: str, fn: Callable[[JsonDict], None]) -> JsonDict:
        """Edit a stored PodDisruptionBudget in place (same rules as update_node)."""
        return self._store.update(PDBS, namespace, name, _in_place(fn))

    def set_pdb_disruptions_allowed(self, namespace: str, name: str, disruptions_allowed: int) -> JsonDict:
        def set_allowed(pdb: JsonDict) -> None:
            pdb["status"] = pdb_status(disruptions_allowed)

        return self._store.update(PDBS, namespace, name, _in_place(set_allowed))

    def set_pdb_status(self, namespace: str, name: str, status: JsonDict) -> JsonDict:
        """Replace a PDB's whole status, as its disruption controller would; fields left out are unset."""

        def replace(pdb: JsonDict) -> None:
            pdb["status"] = dict(status)

        return self._store.update(PDBS, namespace, name, _in_place(replace))

    def add_daemonset(self, daemonset: JsonDict) -> JsonDict:
        """Store a DaemonSet (see objects.daemonset_object); status counters default to one ready pod."""
        spec = daemonset.get("spec") or {}
        if not (daemonset.get("metadata") or {}).get("name") or "selector" not in spec or "template" not in spec:
            raise ValueError("add_daemonset needs metadata.name, spec.selector and spec.template")
        stored = {"apiVersion": "apps/v1", "kind": "DaemonSet", "status": daemonset_status(), **daemonset}
        stored["metadata"] = {**stored["metadata"], "namespace": stored["metadata"].get("namespace") or "default"}
        return self._store.create(DAEMONSETS, stored)

    def put_config_map(self, namespace: str, name: str, data: Mapping[str, str]) -> JsonDict:
        """Create the ConfigMap, or replace its data (as `kubectl apply` of an edited one would)."""
        if self._store.get(CONFIGMAPS, namespace, name) is None:
            obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
            return self._store.create(CONFIGMAPS, {**obj, "data": dict(data)})

        def replace(config_map: JsonDict) -> None:
            config_map["data"] = dict(data)

        return self._store.update(CONFIGMAPS, namespace, name, _in_place(replace))

    def config_map(self, namespace: str, name: str) -> JsonDict | None:
        return self._store.get(CONFIGMAPS, namespace, name)

    def put_resource_slice(self, resource_slice: JsonDict) -> JsonDict:
        """Create or replace a ResourceSlice (cluster-scoped), as a DRA kubelet plugin publishes it."""
        name = resource_slice["metadata"]["name"]
        stored = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **resource_slice}
        if self._store.get(RESOURCESLICES, "", name) is None:
            return self._store.create(RESOURCESLICES, stored)

        def replace_slice(current: JsonDict) -> None:
            current["spec"] = stored["spec"]

        return self._store.update(RESOURCESLICES, "", name, _in_place(replace_slice))

    def add_resource_slice(self, name: str, spec: JsonDict) -> JsonDict:
        """Store a resource.k8s.io/v1 ResourceSlice (what a DRA driver's kubelet plugin publishes)."""
        return self.put_resource_slice({"metadata": {"name": name}, "spec": dict(spec)})

    def delete_resource_slice(self, name: str) -> None:
        if self._store.get(RESOURCESLICES, "", name) is not None:
            self._store.delete(RESOURCESLICES, "", name)

    def resource_slices(self) -> list[JsonDict]:
        items, _ = self._store.list_objects(RESOURCESLICES)
        return items

    def lease(self, namespace: str, name: str) -> JsonDict | None:
        """A deep copy of the stored coordination.k8s.io Lease, or None."""
        return self._store.get(LEASES, namespace, name)

    def add_cluster_policy(self, name: str, spec: JsonDict) -> JsonDict:
        """Store the GPU Operator's ClusterPolicy (nvidia.com/v1, cluster-scoped); an existing one gets `spec`."""
        if self._store.get(CLUSTER_POLICIES, "", name) is not None:
            return self._store.update(CLUSTER_POLICIES, "", name, lambda policy: {**policy, "spec": dict(spec)})
        return self._store.create(
            CLUSTER_POLICIES, {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": name},
                               "spec": dict(spec)}
        )

    def events(self) -> list[JsonDict]:
        """Events created through either API (core/v1 and events.k8s.io/v1), oldest first."""
        core, _ = self._store.list_objects(CORE_EVENTS)
        modern, _ = self._store.list_objects(EVENTS_V1)
        return sorted(core + modern, key=lambda e: int(e["metadata"]["resourceVersion"]))

    # --- observation, faults

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request served so far (a snapshot), with the RBAC verb it needs."""
        return self._requests.snapshot()

    def clear_requests(self) -> None:
        self._requests.clear()

    def inject_fault(
        self, method: str, path_regex: str, status: int, *, times: int = 1, body_reason: str | None = None
    ) -> None:
        """Answer the next `times` requests matching `method` ("*" for any) and `path_regex` with `status`."""
        self._faults.add(method, path_regex, status, times=times, reason=body_reason)

    def drop_watches(self) -> int:
        """Close every open watch connection without the terminating chunk; returns how many there were."""
        return self._store.drop_subscriptions()

    def compact(self) -> str:
        """Expire every older resourceVersion: watches from one get an ERROR event with a 410 Status."""
        return str(self._store.compact())

    def resource_version(self) -> str:
        return str(self._store.resource_version())

    @property
    def listener_errors(self) -> list[BaseException]:
        """Exceptions raised by listeners (logged and kept here; they never fail the write that fired them)."""
        return self._store.listener_errors()

    def on_pod_deleted(self, callback: Callable[[JsonDict], None]) -> None:
        """`callback(pod)` once per deleted pod (API delete, eviction or delete_pod), outside the store lock:
        a Terminating pod's just before its removal, a pod removed at once just after (terminating.py)."""
        self._pod_ends.add(callback)

    def on_node_changed(self, callback: Callable[[JsonDict], None]) -> None:
        """`callback(node)` after each committed node creation or change, outside the store lock."""
        self._store.add_listener(_only(NODES.key, ("ADDED", "MODIFIED"), callback))


def _in_place(fn: Callable[[JsonDict], None]) -> Callable[[JsonDict], JsonDict]:
    def mutate(obj: JsonDict) -> JsonDict:
        fn(obj)
        return obj

    return mutate


def _only(
    resource_key: str, types: tuple[str, ...], callback: Callable[[JsonDict], None]
) -> Callable[[StoredEvent], None]:
    def listener(event: StoredEvent) -> None:
        if event.resource.key == resource_key and event.type in types:
            callback(event.obj)

    return listener
