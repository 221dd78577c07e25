"""`KubeApi`: the one object through which migagent talks to the API server about its node.

It implements `port.KubePort` over the real `kubernetes` client; the work is split by object
kind into nodes.py, pods.py and events.py. Every call returns typed views and raises only
migagent errors (classify.py), retrying transient ones on the injected clock.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from kubernetes.client import ApiClient, CoordinationV1Api, PolicyV1Api

from migagent.clock import Clock
from migagent.kube.cluster_reads import ClusterReads
from migagent.kube.core_v1 import CoreV1Calls
from migagent.kube.events import EventOps
from migagent.kube.lease import LeaseOps, NodeLease, lease_name
from migagent.kube.nodes import NodeOps
from migagent.kube.owners import OwnerReads
from migagent.kube.pdbs import PdbOps
from migagent.kube.pods import PodOps
from migagent.kube.timeouts import RequestTimeout
from migagent.node.budgets import PdbView
from migagent.node.dra import SliceDevice
from migagent.node.port import EvictionOutcome, NodeEvent, NodeView, PodRef, PodView


class KubeApi:
    """Node-scoped access to the API server: our Node, the pods on it, events about it."""

    def __init__(
        self, api_client: ApiClient, *, node_name: str, clock: Clock, timeout: RequestTimeout | None = None
    ) -> None:
        core = CoreV1Calls(api_client)  # not the generated CoreV1Api: core_v1.py says why
        bound = timeout or RequestTimeout()
        self._node_name = node_name
        self._nodes = NodeOps(core, node_name=node_name, clock=clock, timeout=bound)
        self._pods = PodOps(core, node_name=node_name, clock=clock, timeout=bound)
        self._events = EventOps(core, node_name=node_name, clock=clock, timeout=bound)
        self._pdbs = PdbOps(PolicyV1Api(api_client), clock=clock, timeout=bound)
        self._reads = ClusterReads(api_client, clock=clock, timeout=bound)
        self._node_uid: str | None = None
        self._api_client = api_client
        self._clock = clock
        self._timeout = bound

    def node_lease(self, *, namespace: str, identity: str, duration_s: int) -> NodeLease:
        """This node's Lease (`migagent-node-<node>` in `namespace`), claimed as `identity` (kube.lease)."""
        ops = LeaseOps(
            CoordinationV1Api(self._api_client), namespace=namespace, name=lease_name(self._node_name),
            timeout=self._timeout,
        )
        return NodeLease(ops, identity=identity, duration_s=duration_s, clock=self._clock)

    def owner_reads(self, *, cluster_policy: str | None) -> OwnerReads:
        """ResourceSlices for this node, and the ClusterPolicy named `cluster_policy` (None: never read)."""
        return OwnerReads(
            self._api_client, node_name=self._node_name, timeout=self._timeout, clock=self._clock,
            policy=cluster_policy,
        )

    @property
    def node_name(self) -> str:
        return self._node_name

    # --- the Node ---

    def get_node(self) -> NodeView:
        return self._remember(self._nodes.get_node())

    def watch_node(self, resource_version: str, timeout_s: float) -> Iterator[NodeEvent]:
        return self._nodes.watch_node(resource_version, timeout_s)

    def patch_metadata(
        self,
        *,
        labels: Mapping[str, str | None] | None = None,
        annotations: Mapping[str, str | None] | None = None,
        resource_version: str | None = None,
    ) -> NodeView:
        """Set labels/annotations in one strategic-merge patch; a None value deletes the key.

        With `resource_version` the patch carries it as a precondition: NodeChangedError on a 409."""
        return self._remember(
            self._nodes.patch_metadata(labels=labels, annotations=annotations, resource_version=resource_version)
        )

    def set_unschedulable(
        self, unschedulable: bool, *, annotations: Mapping[str, str | None] | None = None
    ) -> NodeView:
        return self._remember(self._nodes.set_unschedulable(unschedulable, annotations=annotations))

    def set_condition(self, condition_type: str, status: str, reason: str, message: str) -> NodeView:
        return self._remember(self._nodes.set_condition(condition_type, status, reason, message))

    def emit_event(self, reason: str, message: str, *, warning: bool) -> None:
        if self._node_uid is None:
            self.get_node()
        self._events.emit(reason, message, warning=warning, node_uid=self._node_uid or "")

    # --- pods on the node ---

    def list_pods_on_node(self, *, label_selector: str | None = None, namespace: str | None = None) -> list[PodView]:
        return self._pods.list_pods_on_node(label_selector=label_selector, namespace=namespace)

    def read_pod(self, ref: PodRef) -> PodView | None:
        return self._pods.read_pod(ref)

    def evict(self, ref: PodRef) -> EvictionOutcome:
        return self._pods.evict(ref)

    def delete_pod(self, ref: PodRef, *, grace_period_s: int | None = None) -> None:
        self._pods.delete_pod(ref, grace_period_s=grace_period_s)

    def list_pdbs(self, namespace: str) -> list[PdbView]:
        """The PodDisruptionBudgets in `namespace` (the safety gate checks the ones guarding pods to evict)."""
        return self._pdbs.list_pdbs(namespace)

    # --- what other components own (read only) ---

    def read_config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        """The device plugin's ConfigMap (its sharing config); None when it does not exist."""
        return self._reads.read_config_map(namespace, name)

    def list_slice_devices(self, *, node_name: str, driver: str) -> list[SliceDevice]:
        """The devices of `driver`'s ResourceSlices for `node_name` (the DRA driver's view)."""
        return self._reads.list_slice_devices(node_name=node_name, driver=driver)

    def _remember(self, node: NodeView) -> NodeView:
        self._node_uid = node.uid or self._node_uid
        return node
