"""The simulator's kubelet and device plugin as clients of the real kube-apiserver.

`RealKubeApi` implements `migagent_sim.cluster_api.ClusterApi`, what the fake kubelet, its plugins and
the simulated node use (FakeApiServer implements it too; mypy holds both to it), with real requests,
each under the identity that makes it on a cluster:
- the kubelet (`system:node:<name>`, client certificate) publishes the Node's status (allocatable,
  capacity) and its pods' status (Running and Ready, CrashLoopBackOff), and finishes terminating
  pods: a pod with a deletionTimestamp has its process ended (the kubelet's callbacks), then is
  deleted with grace period 0, as a kubelet does once the containers stopped;
- the admin creates pods (bound by spec.nodeName, as the scheduler would), the DaemonSets and
  ReplicaSets named as their owners (inert: their controllers are not running), budgets, and changes
  labels; it also deletes the device plugin pod where the DaemonSet controller would;
- the agent gets a TokenRequest token bound to its own pod on the node.
Changes reach the callbacks through watches (node by name, pods by spec.nodeName), as a kubelet
learns them, so they arrive on another thread shortly after the write, not inside it.

`RealSimCluster` is the simulated node (`Simulation`) over this API, its kubelet built the one way
(`cluster_config.make_kubelet`); the agent's client speaks HTTPS to the real server with the cluster CA.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from migagent.clock import Clock, SystemClock
from migagent.kube.adapter import KubeApi
from migagent_sim.apiserver.errors import ApiError
from migagent_sim.apiserver.objects import PodArgs, pod_object
from migagent_sim.apiserver.rbac import UserInfo
from migagent_sim.cluster import SimClusterConfig, Simulation
from migagent_sim.deadline import Deadline
from tests.realkube.control_plane import IDENTITY_POD_LABEL, ControlPlane, Identity
from tests.realkube.deployment import create_pod, ensure_namespace
from tests.realkube.rest import HttpError

if TYPE_CHECKING:
    from migagent.wiring import AgentOptions

JsonDict = dict[str, Any]
Listener = Callable[[JsonDict], None]
_LOG = logging.getLogger(__name__)
_IDENTITY = "app.kubernetes.io/name"
WATCH_TIMEOUT_S = 2.0


class RealKubeApi:
    def __init__(self, plane: ControlPlane, node_name: str, *, agent_account: tuple[str, str]) -> None:
        self.plane = plane
        self.node_name = node_name
        self.agent_account = agent_account
        self._admin = plane.rest(plane.admin)
        self._kubelet = plane.rest(plane.node_identity(node_name))
        self._node_listeners: list[Listener] = []
        self._pod_listeners: list[Listener] = []
        self._finished: set[str] = set()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._agent: Identity | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.plane.url

    @property
    def access(self) -> object | None:
        return self.plane  # not None: every agent request carries its token

    def start(self) -> str:
        watches = (
            ("/api/v1/nodes", {"fieldSelector": f"metadata.name={self.node_name}"}, self._node_event),
            ("/api/v1/pods", {"fieldSelector": f"spec.nodeName={self.node_name}"}, self._pod_event),
        )
        for path, query, handle in watches:
            thread = threading.Thread(
                target=self._watch_loop, args=(path, query, handle), name=f"realkube-watch{path}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        return self.url

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)

    # -- nodes --------------------------------------------------------------------------------

    def add_node(self, name: str, *, labels: Mapping[str, str] | None = None) -> JsonDict:
        """A fresh Node (an old one of that name is reset: labels, annotations, spec, status)."""
        self.plane.ensure_node(name)

        def fresh(node: JsonDict) -> None:
            node["metadata"]["labels"] = {"kubernetes.io/hostname": name, **dict(labels or {})}
            node["metadata"]["annotations"] = {}
            node["spec"].pop("unschedulable", None)
            node["spec"].pop("taints", None)
            node["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}

        self._clear(name)
        return self.update_node(name, fresh)

    def node(self, name: str) -> JsonDict:
        try:
            return self._admin.get(f"/api/v1/nodes/{name}")
        except HttpError as error:
            if error.status == 404:
                raise KeyError(name) from error
            raise

    def update_node(self, name: str, fn: Callable[[JsonDict], None]) -> JsonDict:
        """Edit the Node: metadata and spec as the admin, status as the node's kubelet; retried on 409."""
        path = f"/api/v1/nodes/{name}"
        for _ in range(20):
            current = self.node(name)
            edited = copy.deepcopy(current)
            fn(edited)
            try:
                if (edited["metadata"], edited.get("spec")) != (current["metadata"], current.get("spec")):
                    stored = self._admin.replace(path, edited)
                    stored["status"] = edited.get("status", {})
                    edited = stored
                if edited.get("status") != current.get("status"):
                    writer = self._kubelet if name == self.node_name else self._admin
                    return writer.replace(f"{path}/status", edited)
                return self.node(name)
            except HttpError as error:
                if error.status != 409:
                    raise
        raise RuntimeError(f"node {name} kept changing under update_node")

    def on_node_changed(self, listener: Listener) -> None:
        self._node_listeners.append(listener)

    def on_pod_deleted(self, listener: Listener) -> None:
        self._pod_listeners.append(listener)

    # -- pods ---------------------------------------------------------------------------------

    def pods(self, node_name: str | None = None) -> list[JsonDict]:
        query = {"fieldSelector": f"spec.nodeName={node_name}"} if node_name else {}
        items: list[JsonDict] = self._admin.get("/api/v1/pods", **query)["items"]
        return [p for p in items if (p["metadata"].get("labels") or {}).get(_IDENTITY) != IDENTITY_POD_LABEL]

    def pod(self, namespace: str, name: str) -> JsonDict | None:
        return self._admin.find(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def create_pod(self, *, replicas: int = 1, **pod: Unpack[PodArgs]) -> JsonDict:
        """As the fake's: a pod on `node_name`, Running and Ready (its kubelet says so), or unscheduled;
        `replicas`: what a ReplicaSet owner says it wants."""
        if pod.get("mirror"):
            raise NotImplementedError("mirror pods are not simulated on the real control plane")
        wanted = pod_object(wall_s=time.time(), **pod)
        status = wanted.pop("status")
        created = create_pod(self.plane, wanted, replicas=replicas)
        if pod["node_name"] is None:
            return created
        created["status"] = {**created.get("status", {}), **status}
        return self._write_pod_status(created)

    def update_pod(self, namespace: str, name: str, fn: Callable[[JsonDict], None]) -> JsonDict:
        """Edit a pod's status as its node's kubelet (the only part a kubelet writes)."""
        pod = self.pod(namespace, name)
        if pod is None:
            raise ApiError(404, f'pods "{name}" not found')
        fn(pod)
        return self._write_pod_status(pod)

    def _write_pod_status(self, pod: JsonDict) -> JsonDict:
        metadata = pod["metadata"]
        writer = self._kubelet if pod["spec"].get("nodeName") == self.node_name else self._admin
        return writer.replace(f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}/status", pod)

    def delete_pod(self, namespace: str, name: str) -> JsonDict:
        """Delete as the controller that owns it would (graceful); the kubelet then finishes it."""
        try:
            return self._admin.delete(f"/api/v1/namespaces/{namespace}/pods/{name}")
        except HttpError as error:
            raise ApiError(error.status, error.message) from error

    # -- what the node's plugins read and publish ----------------------------------------------

    def put_config_map(self, namespace: str, name: str, data: Mapping[str, str]) -> JsonDict:
        """Create the ConfigMap, or replace its data, as the admin."""
        ensure_namespace(self.plane, namespace)
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": dict(data)}
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        try:
            return self._admin.create(path, body)
        except HttpError as error:
            if error.status != 409:
                raise
        current = self._admin.get(f"{path}/{name}")
        return self._admin.replace(f"{path}/{name}", {**current, "data": dict(data)})

    def config_map(self, namespace: str, name: str) -> JsonDict | None:
        try:
            return self._admin.get(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
        except HttpError as error:
            if error.status == 404:
                return None
            raise

    def put_resource_slice(self, resource_slice: JsonDict) -> JsonDict:
        """Create or replace a ResourceSlice as the node (a DRA kubelet plugin publishes its own)."""
        path = "/apis/resource.k8s.io/v1/resourceslices"
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **resource_slice}
        try:
            return self._kubelet.create(path, body)
        except HttpError as error:
            if error.status != 409:
                raise
        name = body["metadata"]["name"]
        current = self._kubelet.get(f"{path}/{name}")
        body["metadata"] = {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
        return self._kubelet.replace(f"{path}/{name}", body)

    # -- budgets ------------------------------------------------------------------------------

    def add_pdb(self, namespace: str, name: str, *, match_labels: Mapping[str, str], max_unavailable: int) -> JsonDict:
        """A budget the disruption controller keeps the status of; waits until it has looked at it."""
        ensure_namespace(self.plane, namespace)
        budget = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": dict(match_labels)}},
        }
        self._admin.create(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", budget)
        return self.pdb_status(namespace, name)

    def pdb_status(self, namespace: str, name: str, *, allowed: int | None = None, timeout_s: float = 60) -> JsonDict:
        """The budget's status once the controller observed its spec (and, if given, allows `allowed`)."""
        deadline = Deadline(timeout_s)
        while True:
            pdb = self._admin.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}")
            status: JsonDict = pdb.get("status") or {}
            observed = status.get("observedGeneration") == pdb["metadata"].get("generation")
            if observed and (allowed is None or status.get("disruptionsAllowed") == allowed):
                return status
            if deadline.passed():
                raise AssertionError(f"PodDisruptionBudget {namespace}/{name} never reached {allowed}: {status}")
            time.sleep(0.2)

    # -- identities ---------------------------------------------------------------------------

    def issue_token(self, user: UserInfo) -> str:
        """The agent's token, bound to its pod on this node (`user` is the fake's notion; the account is ours)."""
        namespace, name = self.agent_account
        if self._agent is None:
            self._agent = self.plane.agent_identity(namespace=namespace, service_account=name, node=self.node_name)
        assert self._agent.token is not None
        return self._agent.token

    # -- the kubelet's watches ----------------------------------------------------------------

    def _watch_loop(self, path: str, query: Mapping[str, str], handle: Callable[[str, JsonDict], None]) -> None:
        resource_version = ""
        while not self._stop.is_set():
            try:
                if not resource_version:
                    resource_version = self._admin.get(path, **query)["metadata"]["resourceVersion"]
                for event in self._admin.watch(path, resource_version=resource_version, timeout_s=2, **query):
                    if event["type"] == "ERROR":
                        resource_version = ""  # expired: list again
                        break
                    obj = event["object"]
                    resource_version = obj["metadata"].get("resourceVersion", resource_version)
                    if event["type"] != "BOOKMARK":
                        try:
                            handle(event["type"], obj)
                        except Exception:
                            _LOG.exception("simulated kubelet failed on a %s event", event["type"])
                    if self._stop.is_set():
                        return
            except Exception:
                if self._stop.is_set():
                    return
                _LOG.exception("simulated kubelet watch of %s broke", path)
                time.sleep(0.2)

    def _node_event(self, kind: str, node: JsonDict) -> None:
        if kind in ("ADDED", "MODIFIED"):
            for listener in list(self._node_listeners):
                listener(node)

    def _pod_event(self, kind: str, pod: JsonDict) -> None:
        metadata = pod["metadata"]
        terminating = kind == "DELETED" or metadata.get("deletionTimestamp") is not None
        uid = metadata.get("uid", "")
        if not terminating or uid in self._finished:
            return
        self._finished.add(uid)
        for listener in list(self._pod_listeners):
            listener(pod)  # the containers stop: the workload's process ends
        if kind != "DELETED":
            path = f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}"
            try:
                self._kubelet.delete(path, {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
            except HttpError as error:
                if error.status not in (404, 409):
                    raise

    def _clear(self, node_name: str) -> None:
        """Remove the pods and budgets a previous scenario left, on `node_name` or anywhere (not the agents'
        identity pods)."""
        budgets: list[JsonDict] = self._admin.get("/apis/policy/v1/poddisruptionbudgets")["items"]
        for pdb in budgets:
            metadata = pdb["metadata"]
            self._admin.delete(
                f"/apis/policy/v1/namespaces/{metadata['namespace']}/poddisruptionbudgets/{metadata['name']}"
            )
        for pod in self.pods(None):  # every scenario's pods, wherever bound (not the harness's probe)
            metadata = pod["metadata"]
            if metadata["name"] == "policy-probe":
                continue
            self._finished.add(metadata["uid"])
            try:
                self._admin.delete(
                    f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}", {"gracePeriodSeconds": 0}
                )
            except HttpError as error:
                if error.status != 404:
                    raise


class RealSimCluster(Simulation[RealKubeApi]):
    """The simulated node over the real control plane (FakeNvml and the PodResources socket as with the fake)."""

    def __init__(
        self, plane: ControlPlane, workdir: Path, config: SimClusterConfig, *, agent_account: tuple[str, str]
    ) -> None:
        api = RealKubeApi(plane, config.node_name, agent_account=agent_account)
        super().__init__(workdir, config, api, agent_account=agent_account)

    def start(self) -> RealSimCluster:
        super().start()
        return self

    def options(self, **settings: Any) -> AgentOptions:
        """As the fake's, with a short watch: the real server ends a watch only at its timeout, and a
        stopped agent's watch thread must end with the test, not 30 s later."""
        base = super().options(**settings)
        return replace(base, watch=replace(base.watch, watch_timeout_s=WATCH_TIMEOUT_S))

    def agent_api(self, options: AgentOptions | None = None, *, clock: Clock | None = None) -> KubeApi:
        options = options or self.options()
        token = self.api.issue_token(UserInfo("unused", ()))
        api_client = self.api.plane.api_client(Identity("agent", token=token))
        return KubeApi(
            api_client, node_name=options.node_name, clock=clock or SystemClock(), timeout=options.request_timeout
        )

    def write_kubeconfig(self, path: Path) -> Path:
        token = self.api.issue_token(UserInfo("unused", ()))
        return self.api.plane.write_kubeconfig(path, Identity("agent", token=token))
