"""A pool of simulated GPU nodes whose Kubernetes is the real control plane, kube-scheduler included.

Each node has its FakeNvml, its simulated kubelet and device plugin (clients of the real kube-apiserver
as `system:node:<name>`) and its agent (its service account's token bound to a pod on the node, under
the gpu-operator overlay's RBAC and admission policies). The kubelet publishes the Node's CPU, memory
and pod capacity beside the GPU resources, and starts the pods kube-scheduler binds to its node (it
holds the device the pod asks for, then reports the pod Running): whether and where a pending pod runs
is the scheduler's decision. The autopilot's component (deploy/components/autopilot) is installed
with the overlay; `autopilot_api` is a client as its service account.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from migagent.clock import SystemClock
from migagent.kube.adapter import KubeApi
from migagent.kube.demand_api import DemandApi
from migagent.node.names import GPU_RESOURCE, LAYOUTS_CONFIGMAP_KEY, MIG_CONFIG_LABEL, ROLLOUT_LABEL
from migagent.reconcile.journal import FileJournal
from migagent.sources.node_label import WatchSettings
from migagent.wiring import build_agent
from migagent_sim.apiserver import FakeApiServer
from migagent_sim.apiserver.objects import DEFAULT_NODE_CAPACITY, pod_object
from migagent_sim.cluster import GPU_OPERATOR_LABELS, RunningAgent, fast_options
from migagent_sim.pool import PoolNode
from tests.realkube.control_plane import ControlPlane, Identity
from tests.realkube.deployment import Deployer, Variant, ensure_namespace, ensure_owner
from tests.realkube.rest import HttpError
from tests.realkube.world import WATCH_TIMEOUT_S, RealKubeApi

JsonDict = dict[str, Any]
Starter = Callable[..., None]
"""Starts a pod bound to the node: (namespace, name, *, resource, labels, owner_kind)."""
AUTOPILOT_VARIANT = Variant("gpu-operator", ("autopilot",), delete_namespaces=("gpu-operator",))
AUTOPILOT_ACCOUNT = ("migagent", "migagent-autopilot")
OPT_IN = {"migagent.io/autopilot": "enabled"}
POOL = "h100"


class SchedulingKubeApi(RealKubeApi):
    """RealKubeApi whose kubelet also starts the pods a scheduler binds to its node."""

    def __init__(self, plane: ControlPlane, node_name: str, *, agent_account: tuple[str, str]) -> None:
        super().__init__(plane, node_name, agent_account=agent_account)
        self.kubelet_start: Starter | None = None
        self._seen: set[str] = set()

    def _pod_event(self, kind: str, pod: JsonDict) -> None:
        super()._pod_event(kind, pod)
        metadata, status = pod["metadata"], pod.get("status") or {}
        bound = pod["spec"].get("nodeName") == self.node_name and status.get("phase", "Pending") == "Pending"
        if kind == "DELETED" or metadata.get("deletionTimestamp") or not bound or metadata["uid"] in self._seen:
            return
        requests = ((pod["spec"]["containers"][0].get("resources") or {}).get("requests") or {})
        resource = next((name for name in requests if name.startswith("nvidia.com/")), None)
        if resource is None or self.kubelet_start is None:
            return
        self._seen.add(metadata["uid"])
        owners = metadata.get("ownerReferences") or []
        self.kubelet_start(metadata["namespace"], metadata["name"], resource=resource,
                           labels=metadata.get("labels") or {}, owner_kind=owners[0]["kind"] if owners else None)


def _with_capacity(node: JsonDict) -> None:
    """What a kubelet publishes besides the device plugin's resources: CPU, memory, pods."""
    status = node.setdefault("status", {})
    for field in ("capacity", "allocatable"):
        status.setdefault(field, {}).update(DEFAULT_NODE_CAPACITY)


class RealPool:
    def __init__(self, plane: ControlPlane, deployer: Deployer, workdir: Path, *, nodes: int = 3,
                 spec: str = "2xH100-80GB-SXM", start_layout: str = "all-1g.10gb",
                 opted_in: tuple[int, ...] = (0, 1)) -> None:
        self.plane = plane
        self.deployer = deployer
        self.workdir = workdir
        self.spec = spec
        self.start_layout = start_layout
        self.names = [f"gpu-{POOL}-{index + 1}" for index in range(nodes)]
        self.opted_in = {self.names[index] for index in opted_in}
        self.layout_file = workdir / "mig-layouts.yaml"
        self.nodes: dict[str, PoolNode] = {}
        self.apis: dict[str, SchedulingKubeApi] = {}
        self.agents: dict[str, RunningAgent] = {}
        self.admin = plane.rest(plane.admin)
        self._objects: list[JsonDict] = []

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> RealPool:
        self._objects = self.deployer.install(AUTOPILOT_VARIANT)
        self._forget_earlier_scenarios()
        layouts = next(o for o in self._objects if o["kind"] == "ConfigMap"
                       and o["metadata"]["name"].startswith("migagent-layouts"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.layout_file.write_text(layouts["data"][LAYOUTS_CONFIGMAP_KEY], encoding="utf-8")
        account = {"namespace": "migagent", "name": "migagent"}  # the DaemonSet's (Deployer.agent)
        socket_dir = self.workdir / "sockets"
        socket_dir.mkdir(exist_ok=True)
        for name in self.names:  # every Node first: a fresh Node clears what earlier scenarios left
            api = SchedulingKubeApi(self.plane, name, agent_account=(account["namespace"], account["name"]))
            node = PoolNode(name, cast(FakeApiServer, api), self.workdir / name, socket_dir, spec=self.spec,
                            plugin_lag_s=0.0)
            node.workdir.mkdir(parents=True, exist_ok=True)
            node.apply_directly(self.layout_file, self.start_layout)
            labels = {**GPU_OPERATOR_LABELS, "pool": POOL, MIG_CONFIG_LABEL: self.start_layout,
                      **(OPT_IN if name in self.opted_in else {})}
            api.add_node(name, labels=labels)
            api.update_node(name, _with_capacity)
            self.nodes[name], self.apis[name] = node, api
        for name, api in self.apis.items():
            api.start()
            self.nodes[name].kubelet.start()
            api.kubelet_start = self._starter(self.nodes[name])
        for name in self.names:
            self._start_agent(name)
        return self

    def _forget_earlier_scenarios(self) -> None:
        """The autopilot's object (its cool-downs and history) and the rollouts an earlier scenario left."""
        configmaps = "/api/v1/namespaces/migagent/configmaps"
        stale = self.admin.get(configmaps, labelSelector=ROLLOUT_LABEL)["items"]
        for name in ["migagent-autopilot", *(item["metadata"]["name"] for item in stale)]:
            try:
                self.admin.delete(f"{configmaps}/{name}")
            except HttpError as error:
                if error.status != 404:
                    raise

    def stop(self) -> None:
        for agent in self.agents.values():
            agent.stop(timeout_s=10.0)
        for node in self.nodes.values():
            node.stop()
        for api in self.apis.values():
            api.stop()

    @staticmethod
    def _starter(node: PoolNode) -> Starter:
        def start(namespace: str, name: str, *, resource: str, labels: Mapping[str, str],
                  owner_kind: str | None) -> None:
            profile = None if resource == GPU_RESOURCE else resource
            node.kubelet.run_workload(namespace, name, profile=profile, labels=labels, owner_kind=owner_kind,
                                      bound=True)

        return start

    def _start_agent(self, name: str) -> None:
        node = self.nodes[name]
        base = fast_options(name, self.layout_file, node.socket_path)
        options = replace(
            base, settings=replace(base.settings, resync_period_s=0.5),
            watch=WatchSettings(resync_period_s=0.5, watch_timeout_s=WATCH_TIMEOUT_S, backoff_initial_s=0.05,
                                backoff_max_s=0.5),
        )
        identity = self.deployer.agent(self._objects, name)
        api = KubeApi(self.plane.api_client(identity), node_name=name, clock=SystemClock(),
                      timeout=options.request_timeout)
        agent, source = build_agent(options, api=api, driver=node.driver(),
                                    journal=FileJournal(node.workdir / "journal"), clock=SystemClock())
        self.agents[name] = RunningAgent(agent, source).start()

    # --- clients ---------------------------------------------------------------------------------------

    def autopilot_identity(self) -> Identity:
        namespace, account = AUTOPILOT_ACCOUNT
        answer = self.admin.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
                                   {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
        return Identity(f"system:serviceaccount:{namespace}:{account}", token=answer["status"]["token"])

    def demand_api(self, identity: Identity | None = None) -> DemandApi:
        return DemandApi(self.plane.api_client(identity or self.plane.admin), clock=SystemClock())

    # --- the world -------------------------------------------------------------------------------------

    def node(self, name: str) -> JsonDict:
        return self.admin.get(f"/api/v1/nodes/{name}")

    def labels(self, name: str) -> dict[str, str]:
        return dict(self.node(name)["metadata"].get("labels") or {})

    def submit(self, name: str, resource: str, *, priority_class: str | None = None, namespace: str = "ml",
               labels: Mapping[str, str] | None = None, node_selector: Mapping[str, str] | None = None) -> str:
        """A pending pod of an (inert) ReplicaSet asking one `resource`; kube-scheduler decides where it runs."""
        ensure_namespace(self.plane, namespace)
        pod = pod_object(namespace=namespace, name=name, node_name=None, labels=labels, owner_kind="ReplicaSet",
                         owner_name=f"{name}-owner", resources={resource: 1}, wall_s=time.time())
        pod.pop("status")
        for reference in pod["metadata"]["ownerReferences"]:
            reference["uid"] = ensure_owner(self.plane, "ReplicaSet", namespace, reference["name"])
        if priority_class:
            pod["spec"]["priorityClassName"] = priority_class
        if node_selector:
            pod["spec"]["nodeSelector"] = dict(node_selector)
        self.admin.create(f"/api/v1/namespaces/{namespace}/pods", pod)
        return f"{namespace}/{name}"

    def pod(self, pod: str) -> JsonDict | None:
        namespace, name = pod.split("/")
        return self.admin.find(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def running(self, pods: list[str]) -> dict[str, str]:
        """Pod -> node, for those Running."""
        found = {}
        for name in pods:
            pod = self.pod(name)
            if pod is not None and (pod.get("status") or {}).get("phase") == "Running":
                found[name] = pod["spec"]["nodeName"]
        return found

    def priority_class(self, name: str, value: int) -> None:
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value, "preemptionPolicy": "Never"}
        try:
            self.admin.create("/apis/scheduling.k8s.io/v1/priorityclasses", copy.deepcopy(body))
        except HttpError as error:
            if error.status != 409:
                raise
