"""The simulator's kubelet and device plugin as clients of the real kube-apiserver.

`RealKubeApi` has the surface of FakeApiServer that FakeKubelet, FakeDevicePlugin and SimCluster use
(node, add_node, update_node, pods, create_pod, update_pod, delete_pod, on_node_changed,
on_pod_deleted, issue_token), implemented with real requests, each under the identity that makes it
on a cluster:
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

`RealSimCluster` is SimCluster with this API in place of the fake one; the agent's client speaks
HTTPS to the real server with the cluster CA.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from kubernetes import client, watch

from migagent.cli.simcluster import SimCluster, SimClusterConfig
from migagent.clock import Clock, SystemClock
from migagent.kube.adapter import KubeApi
from migagent.sim.kube_apiserver import FakeApiServer
from migagent.sim.kube_apiserver.errors import ApiError
from migagent.sim.kube_apiserver.objects import pod_object
from migagent.sim.kube_apiserver.rbac import UserInfo
from migagent.sim.kubelet import FakeKubelet
from tests.realkube.control_plane import ControlPlane, Identity
from tests.realkube.deployment import ensure_namespace, ensure_owner

if TYPE_CHECKING:
    from migagent.cli.agent import AgentOptions

JsonDict = dict[str, Any]
Listener = Callable[[JsonDict], None]
_LOG = logging.getLogger(__name__)
_IDENTITY_POD_LABEL = "migagent-test-identity"


def _plain(api: client.ApiClient, model: Any) -> JsonDict:
    result: JsonDict = api.sanitize_for_serialization(model)
    return result


class RealKubeApi:
    def __init__(self, plane: ControlPlane, node_name: str, *, agent_account: tuple[str, str]) -> None:
        self.plane = plane
        self.node_name = node_name
        self.agent_account = agent_account
        self._admin = plane.api_client(plane.admin)
        self._kubelet = plane.api_client(plane.node_identity(node_name))
        self._admin_core = client.CoreV1Api(self._admin)
        self._kubelet_core = client.CoreV1Api(self._kubelet)
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
    def access(self) -> object:
        return self.plane  # not None: every agent request carries its token

    def start(self) -> str:
        for target in (self._watch_node, self._watch_pods):
            thread = threading.Thread(target=target, name=f"realkube-{target.__name__}", daemon=True)
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
            node["spec"] = {}
            node["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}

        self._clear_pods(name)
        return self.update_node(name, fresh)

    def node(self, name: str) -> JsonDict:
        try:
            return _plain(self._admin, self._admin_core.read_node(name))
        except client.ApiException as error:
            if error.status == 404:
                raise KeyError(name) from error
            raise

    def update_node(self, name: str, fn: Callable[[JsonDict], None]) -> JsonDict:
        """Edit the Node: metadata and spec as the admin, status as the node's kubelet; retried on 409."""
        for _ in range(20):
            current = self.node(name)
            edited = copy.deepcopy(current)
            fn(edited)
            try:
                if (edited["metadata"], edited.get("spec")) != (current["metadata"], current.get("spec")):
                    edited = _plain(self._admin, self._admin_core.replace_node(name, edited)) | {
                        "status": edited.get("status", {})
                    }
                if edited.get("status") != current.get("status"):
                    status_writer = self._kubelet_core if name == self.node_name else self._admin_core
                    stored = self.node(name)
                    stored["status"] = edited.get("status", {})
                    return _plain(self._admin, status_writer.replace_node_status(name, stored))
                return self.node(name)
            except client.ApiException as error:
                if error.status != 409:
                    raise
        raise RuntimeError(f"node {name} kept changing under update_node")

    def on_node_changed(self, listener: Listener) -> None:
        self._node_listeners.append(listener)

    def on_pod_deleted(self, listener: Listener) -> None:
        self._pod_listeners.append(listener)

    # -- pods ---------------------------------------------------------------------------------

    def pods(self, node_name: str | None = None) -> list[JsonDict]:
        selector = f"spec.nodeName={node_name}" if node_name else ""
        items = self._admin_core.list_pod_for_all_namespaces(field_selector=selector).items
        pods = [_plain(self._admin, p) for p in items]
        return [
            p for p in pods if (p["metadata"].get("labels") or {}).get("app.kubernetes.io/name") != _IDENTITY_POD_LABEL
        ]

    def pod(self, namespace: str, name: str) -> JsonDict | None:
        try:
            return _plain(self._admin, self._admin_core.read_namespaced_pod(name, namespace))
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def create_pod(
        self,
        *,
        node_name: str | None,
        namespace: str,
        name: str,
        labels: Mapping[str, str] | None = None,
        owner_kind: str | None = None,
        mirror: bool = False,
        resources: Mapping[str, str | int] | None = None,
        phase: str | None = None,
        owner_name: str | None = None,
        replicas: int = 1,
    ) -> JsonDict:
        """As the fake's: a pod on `node_name`, Running and Ready (its kubelet says so), or unscheduled."""
        if mirror:
            raise NotImplementedError("mirror pods are not simulated on the real control plane")
        wanted = pod_object(
            namespace=namespace,
            name=name,
            node_name=node_name,
            labels=labels,
            owner_kind=owner_kind,
            owner_name=owner_name,
            resources=resources,
            phase=phase,
            wall_s=time.time(),
        )
        status = wanted.pop("status")
        ensure_namespace(self.plane, namespace)
        for reference in wanted["metadata"].get("ownerReferences") or []:
            reference["apiVersion"] = "apps/v1"
            reference["uid"] = ensure_owner(
                self.plane, reference["kind"], namespace, reference["name"], replicas=replicas
            )
        created = _plain(self._admin, self._admin_core.create_namespaced_pod(namespace, wanted))
        if node_name is None:
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
        writer = self._kubelet_core if pod["spec"].get("nodeName") == self.node_name else self._admin_core
        return _plain(self._admin, writer.replace_namespaced_pod_status(metadata["name"], metadata["namespace"], pod))

    def delete_pod(self, namespace: str, name: str) -> JsonDict:
        """Delete as the controller that owns it would (graceful); the kubelet then finishes it."""
        try:
            return _plain(self._admin, self._admin_core.delete_namespaced_pod(name, namespace))
        except client.ApiException as error:
            raise ApiError(error.status or 500, str(error.reason)) from error

    def set_pod_ready(self, namespace: str, name: str, ready: bool) -> JsonDict:
        def mark(pod: JsonDict) -> None:
            for condition in pod["status"].get("conditions", []):
                if condition["type"] in ("Ready", "ContainersReady"):
                    condition["status"] = "True" if ready else "False"

        return self.update_pod(namespace, name, mark)

    # -- budgets ------------------------------------------------------------------------------

    def add_pdb(self, namespace: str, name: str, *, match_labels: Mapping[str, str], max_unavailable: int) -> JsonDict:
        """A budget the disruption controller keeps the status of; waits until it has looked at it."""
        ensure_namespace(self.plane, namespace)
        policy = client.PolicyV1Api(self._admin)
        policy.create_namespaced_pod_disruption_budget(
            namespace,
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name},
                "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": dict(match_labels)}},
            },
        )
        return self.pdb_status(namespace, name)

    def pdb_status(self, namespace: str, name: str, *, allowed: int | None = None, timeout_s: float = 60) -> JsonDict:
        """The budget's status once the controller observed its spec (and, if given, allows `allowed`)."""
        policy = client.PolicyV1Api(self._admin)
        deadline = time.monotonic() + timeout_s
        while True:
            pdb = _plain(self._admin, policy.read_namespaced_pod_disruption_budget(name, namespace))
            status = pdb.get("status") or {}
            observed = status.get("observedGeneration") == pdb["metadata"].get("generation")
            if observed and (allowed is None or status.get("disruptionsAllowed") == allowed):
                return status
            if time.monotonic() > deadline:
                raise AssertionError(f"PodDisruptionBudget {namespace}/{name} never reached {allowed}: {status}")
            time.sleep(0.2)

    # -- identities ---------------------------------------------------------------------------

    def issue_token(self, user: UserInfo) -> str:
        namespace, name = self.agent_account
        if self._agent is None:
            self._agent = self.plane.agent_identity(namespace=namespace, service_account=name, node=self.node_name)
        assert self._agent.token is not None
        return self._agent.token

    # -- the kubelet's watches ----------------------------------------------------------------

    def _watch_node(self) -> None:
        core = client.CoreV1Api(self.plane.api_client(self.plane.admin))
        self._watch_loop(core.list_node, {"field_selector": f"metadata.name={self.node_name}"}, self._node_event)

    def _watch_pods(self) -> None:
        core = client.CoreV1Api(self.plane.api_client(self.plane.admin))
        self._watch_loop(
            core.list_pod_for_all_namespaces, {"field_selector": f"spec.nodeName={self.node_name}"}, self._pod_event
        )

    def _watch_loop(
        self, lister: Callable[..., Any], selector: Mapping[str, str], handle: Callable[[str, JsonDict], None]
    ) -> None:
        resource_version = lister(**selector).metadata.resource_version
        while not self._stop.is_set():
            stream = watch.Watch()  # type: ignore[no-untyped-call]
            try:
                for event in stream.stream(lister, resource_version=resource_version, timeout_seconds=2, **selector):
                    obj = _plain(self._admin, event["object"])
                    resource_version = obj["metadata"].get("resourceVersion", resource_version)
                    try:
                        handle(event["type"], obj)
                    except Exception:
                        _LOG.exception("simulated kubelet failed on a %s event", event["type"])
                    if self._stop.is_set():
                        break
            except client.ApiException as error:
                if error.status == 410:
                    resource_version = lister(**selector).metadata.resource_version
                    continue
                if self._stop.is_set():
                    return
                _LOG.warning("simulated kubelet watch failed: %s", error)
                time.sleep(0.2)
            except Exception:
                if self._stop.is_set():
                    return
                _LOG.exception("simulated kubelet watch broke")
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
            try:
                self._kubelet_core.delete_namespaced_pod(
                    metadata["name"],
                    metadata["namespace"],
                    grace_period_seconds=0,
                    body={"preconditions": {"uid": uid}},
                )
            except client.ApiException as error:
                if error.status not in (404, 409):
                    raise

    def _clear_pods(self, node_name: str) -> None:
        """Remove the pods and budgets a previous scenario left (not the agent's identity pod)."""
        policy = client.PolicyV1Api(self._admin)
        for pdb in policy.list_pod_disruption_budget_for_all_namespaces().items:
            policy.delete_namespaced_pod_disruption_budget(pdb.metadata.name, pdb.metadata.namespace)
        for pod in self.pods(node_name):
            metadata = pod["metadata"]
            self._finished.add(metadata["uid"])
            try:
                self._admin_core.delete_namespaced_pod(metadata["name"], metadata["namespace"], grace_period_seconds=0)
            except client.ApiException as error:
                if error.status != 404:
                    raise


class RealSimCluster(SimCluster):
    """SimCluster whose Kubernetes is the real control plane (FakeNvml and the PodResources socket as before)."""

    def __init__(
        self, plane: ControlPlane, workdir: Path, config: SimClusterConfig, *, agent_account: tuple[str, str]
    ) -> None:
        super().__init__(workdir, config, agent_account=agent_account)
        self.real = RealKubeApi(plane, self.config.node_name, agent_account=agent_account)
        self.api = cast(FakeApiServer, self.real)
        self.kubelet = FakeKubelet(
            self.api,
            self.fake,
            node_name=self.config.node_name,
            socket_path=self.socket_path,
            plugin_lag_s=self.config.plugin_lag_s,
            plugin_mode=self.config.plugin_mode,
            plugin_namespace=self.config.plugin_namespace,
            plugin_labels=self.config.plugin_labels,
            mig_strategy=self.config.mig_strategy,
        )

    def agent_api(self, options: AgentOptions | None = None, *, clock: Clock | None = None) -> KubeApi:
        options = options or self.options()
        token = self.real.issue_token(UserInfo("unused", ()))
        api_client = self.real.plane.api_client(Identity("agent", token=token))
        return KubeApi(
            api_client, node_name=options.node_name, clock=clock or SystemClock(), timeout=options.request_timeout
        )

    def write_kubeconfig(self, path: Path) -> Path:
        token = self.real.issue_token(UserInfo("unused", ()))
        return self.real.plane.write_kubeconfig(path, Identity("agent", token=token))
