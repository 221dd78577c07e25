"""Cluster I/O of `migagent rollout`: the pool's Nodes, their pods and PDBs, the one label it changes
(only on the Node as read), Events about the nodes it leaves alone, and its state object (a ConfigMap
per rollout in its own namespace, replaced only at the resourceVersion it was read at).

Least privilege (deploy/components/rollout-controller): list and patch nodes (admission narrows the
patch to `nvidia.com/mig.config`), list pods and PDBs, create Events in `default`, and get/list/update
the ConfigMaps of namespace `migagent-rollouts`, which holds rollout state objects only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kubernetes.client import ApiClient, CoreV1Api, PolicyV1Api, V1ConfigMap, V1Namespace, V1ObjectMeta
from kubernetes.client.exceptions import ApiException

from migagent.clock import Clock
from migagent.errors import PermanentError, TransientError
from migagent.kube.classify import call_with_retries, classified
from migagent.kube.convert import node_view, pod_view
from migagent.kube.core_v1 import CoreV1Calls
from migagent.kube.events import EventOps
from migagent.kube.pdbs import pdb_view
from migagent.kube.timeouts import RequestTimeout
from migagent.node.budgets import PdbView
from migagent.node.names import (
    LAYOUTS_CONFIGMAP_KEY,
    LAYOUTS_CONFIGMAP_PREFIX,
    LAYOUTS_NAMESPACE,
    MIG_CONFIG_LABEL,
    ROLLOUT_CONFIGMAP_PREFIX,
    ROLLOUT_LABEL,
    ROLLOUT_NAMESPACE,
)
from migagent.node.port import NodeChangedError, NodeView, PodView

_TIMEOUT_S = (5.0, 30.0)
_HTTP_NOT_FOUND = 404
_HTTP_CONFLICT = 409
_RESTRICTED = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn", "audit")}


class StateConflictError(TransientError):
    """The state object changed since it was read (409): read it again, decide again."""

    def __init__(self, message: str) -> None:
        super().__init__(message, delay=0.0)


class StoredState:
    """A state ConfigMap's data, where it lives and the resourceVersion it was read at."""

    def __init__(self, namespace: str, object_name: str, data: Mapping[str, str], resource_version: str) -> None:
        self.namespace = namespace
        self.object_name = object_name
        self.rollout = object_name.removeprefix(ROLLOUT_CONFIGMAP_PREFIX)
        self.data = dict(data)
        self.resource_version = resource_version


def state_object_name(rollout: str) -> str:
    return f"{ROLLOUT_CONFIGMAP_PREFIX}{rollout}"


class RolloutApi:
    def __init__(
        self,
        api_client: ApiClient,
        *,
        clock: Clock,
        namespace: str = ROLLOUT_NAMESPACE,
        layouts_namespace: str = LAYOUTS_NAMESPACE,
        layouts_text: str | None = None,
    ) -> None:
        self._core = CoreV1Api(api_client)
        self._layouts_text = layouts_text  # a layout file's (-f): the ConfigMap is not read
        self._event_calls = CoreV1Calls(api_client)
        self._policy = PolicyV1Api(api_client)
        self._clock = clock
        self.namespace = namespace
        self.layouts_namespace = layouts_namespace

    # --- the pool ---------------------------------------------------------------------------------

    def list_nodes(self, selector: str) -> list[NodeView]:
        call = f"list nodes -l {selector}"

        def read() -> list[NodeView]:
            with classified(call):
                listing = self._core.list_node(label_selector=selector or None, _request_timeout=_TIMEOUT_S)
            return sorted((node_view(item) for item in listing.items or ()), key=lambda n: n.name)

        return call_with_retries(call, read, clock=self._clock)

    def set_layout(self, node: NodeView, layout: str | None) -> NodeView:
        """Patch `nvidia.com/mig.config` of `node` and nothing else (None removes it), only while the Node
        is at the resourceVersion it was read at: NodeChangedError otherwise, and the caller reads it again
        (someone may have set the label meanwhile). One try: any failure is decided afresh at the next look."""
        call = f"label node {node.name} {MIG_CONFIG_LABEL}={layout} at resourceVersion {node.resource_version}"
        body = {"metadata": {"labels": {MIG_CONFIG_LABEL: layout}, "resourceVersion": node.resource_version}}
        try:
            with classified(call):
                return node_view(self._core.patch_node(node.name, body, _request_timeout=_TIMEOUT_S))
        except TransientError as error:
            cause = error.__cause__
            if isinstance(cause, ApiException) and cause.status == _HTTP_CONFLICT:
                raise NodeChangedError(f"{call}: the node changed since it was read") from error
            raise

    def warn_node(self, node: NodeView, reason: str, message: str) -> None:
        """A Warning Event on the Node (namespace `default`, where `kubectl describe node` finds it)."""
        events = EventOps(
            self._event_calls, node_name=node.name, clock=self._clock, timeout=RequestTimeout(_TIMEOUT_S[1])
        )
        events.emit(reason, message, warning=True, node_uid=node.uid)

    def list_pods_on_node(self, node: str) -> list[PodView]:
        call = f"list pods on node {node}"

        def read() -> list[PodView]:
            with classified(call):
                pods = self._core.list_pod_for_all_namespaces(
                    field_selector=f"spec.nodeName={node}", _request_timeout=_TIMEOUT_S
                )
            return [pod_view(pod) for pod in pods.items or ()]

        return call_with_retries(call, read, clock=self._clock)

    def list_pdbs(self) -> list[PdbView]:
        call = "list poddisruptionbudgets in all namespaces"

        def read() -> list[PdbView]:
            with classified(call):
                budgets = self._policy.list_pod_disruption_budget_for_all_namespaces(_request_timeout=_TIMEOUT_S)
            return [pdb_view(budget) for budget in budgets.items or ()]

        return call_with_retries(call, read, clock=self._clock)

    def read_layouts(self) -> str:
        """The layout file of the agents' ConfigMap (deploy/base `migagent-layouts-<hash>`; the newest)."""
        if self._layouts_text is not None:
            return self._layouts_text
        call = f"list configmaps in namespace {self.layouts_namespace}"
        with classified(call):
            listing = self._core.list_namespaced_config_map(self.layouts_namespace, _request_timeout=_TIMEOUT_S)
        found = [
            item for item in listing.items or ()
            if item.metadata and (item.metadata.name or "").startswith(LAYOUTS_CONFIGMAP_PREFIX)
            and LAYOUTS_CONFIGMAP_KEY in (item.data or {})
        ]
        if not found:
            raise PermanentError(
                f"no ConfigMap {LAYOUTS_CONFIGMAP_PREFIX}* with key {LAYOUTS_CONFIGMAP_KEY} in namespace"
                f" {self.layouts_namespace}: deploy migagent (deploy/), name its namespace with --layouts-namespace,"
                " or give the layout file with -f"
            )
        newest = max(found, key=lambda item: str(item.metadata.creation_timestamp if item.metadata else ""))
        return str((newest.data or {})[LAYOUTS_CONFIGMAP_KEY])

    # --- state objects ------------------------------------------------------------------------------

    def read_state(self, rollout: str) -> StoredState | None:
        name = state_object_name(rollout)
        call = f"get configmap {self.namespace}/{name}"

        def read() -> StoredState | None:
            try:
                with classified(call):
                    item = self._core.read_namespaced_config_map(name, self.namespace, _request_timeout=_TIMEOUT_S)
            except PermanentError as error:
                if isinstance(error.__cause__, ApiException) and error.__cause__.status == _HTTP_NOT_FOUND:
                    return None
                raise
            return _stored(item)

        return call_with_retries(call, read, clock=self._clock)

    def list_states(self) -> list[StoredState]:
        call = f"list configmaps -l {ROLLOUT_LABEL} in namespace {self.namespace}"
        with classified(call):
            listing = self._core.list_namespaced_config_map(
                self.namespace, label_selector=ROLLOUT_LABEL, _request_timeout=_TIMEOUT_S
            )
        return [
            _stored(item) for item in listing.items or ()
            if item.metadata is not None and (item.metadata.name or "").startswith(ROLLOUT_CONFIGMAP_PREFIX)
        ]

    def create_state(self, rollout: str, data: Mapping[str, str]) -> str | None:
        """Create the object; its resourceVersion, or None when it exists already (409 AlreadyExists). The
        first one creates the namespace too where it does not exist yet (an install without the
        rollout-controller component, whose namespace.yaml it matches)."""
        name = state_object_name(rollout)
        body = V1ConfigMap(
            metadata=V1ObjectMeta(name=name, namespace=self.namespace, labels={ROLLOUT_LABEL: rollout}),
            data=dict(data),
        )
        call = f"create configmap {self.namespace}/{name}"

        def create() -> str:
            return self._conditional(
                call, lambda: self._core.create_namespaced_config_map(self.namespace, body, _request_timeout=_TIMEOUT_S)
            )

        try:
            try:
                return create()
            except PermanentError as error:
                if not (isinstance(error.__cause__, ApiException) and error.__cause__.status == _HTTP_NOT_FOUND):
                    raise
                self._create_namespace()
                return create()
        except StateConflictError:
            return None

    def _create_namespace(self) -> None:
        call = f"create namespace {self.namespace} (where rollout state objects live)"
        body = V1Namespace(metadata=V1ObjectMeta(name=self.namespace, labels=dict(_RESTRICTED)))
        try:
            with classified(call):
                self._core.create_namespace(body, _request_timeout=_TIMEOUT_S)
        except TransientError as error:
            cause = error.__cause__
            if not (isinstance(cause, ApiException) and cause.status == _HTTP_CONFLICT):  # another start made it
                raise

    def replace_state(self, rollout: str, data: Mapping[str, str], resource_version: str) -> str:
        """Replace the object only if it is still at `resource_version`; StateConflictError otherwise."""
        name = state_object_name(rollout)
        body = V1ConfigMap(
            metadata=V1ObjectMeta(
                name=name, namespace=self.namespace, labels={ROLLOUT_LABEL: rollout}, resource_version=resource_version
            ),
            data=dict(data),
        )
        return self._conditional(
            f"replace configmap {self.namespace}/{name}",
            lambda: self._core.replace_namespaced_config_map(name, self.namespace, body, _request_timeout=_TIMEOUT_S),
        )

    def _conditional(self, call: str, write: Callable[[], V1ConfigMap]) -> str:
        try:
            with classified(call):
                item = write()
        except TransientError as error:
            cause = error.__cause__
            if isinstance(cause, ApiException) and cause.status == _HTTP_CONFLICT:
                raise StateConflictError(f"{call}: the object changed since it was read") from error
            raise
        return str((item.metadata.resource_version if item.metadata else None) or "")


def _stored(item: V1ConfigMap) -> StoredState:
    metadata = item.metadata or V1ObjectMeta()
    return StoredState(str(metadata.namespace or ""), str(metadata.name or ""), item.data or {},
                       str(metadata.resource_version or ""))
