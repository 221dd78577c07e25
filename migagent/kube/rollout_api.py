"""Cluster I/O of `migagent rollout`: the pool's Nodes, their pods and PDBs, the one label it changes,
and its state object (a ConfigMap per rollout, replaced only at the resourceVersion it was read at).

Least privilege (deploy/components/rollout-controller): list/watch nodes, list pods and PDBs,
patch nodes (admission narrows it to `nvidia.com/mig.config`), and get/list/create/update the
ConfigMaps of its own namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kubernetes.client import ApiClient, CoreV1Api, PolicyV1Api, V1ConfigMap, V1ObjectMeta
from kubernetes.client.exceptions import ApiException

from migagent.clock import Clock
from migagent.errors import PermanentError, TransientError
from migagent.kube.classify import call_with_retries, classified
from migagent.kube.convert import node_view, pod_view
from migagent.kube.pdbs import pdb_view
from migagent.node.budgets import PdbView
from migagent.node.names import (
    LAYOUTS_CONFIGMAP_KEY,
    LAYOUTS_CONFIGMAP_PREFIX,
    MIG_CONFIG_LABEL,
    ROLLOUT_CONFIGMAP_PREFIX,
    ROLLOUT_LABEL,
    ROLLOUT_NAMESPACE,
)
from migagent.node.port import NodeView, PodView

_TIMEOUT_S = (5.0, 30.0)
_HTTP_NOT_FOUND = 404
_HTTP_CONFLICT = 409
STATE_KEY = "state"
LAYOUTS_KEY = "layouts"


class StateConflictError(TransientError):
    """The state object changed since it was read (409), or already exists: read it again, decide again."""

    def __init__(self, message: str) -> None:
        super().__init__(message, delay=0.0)


class StoredState:
    """A state ConfigMap's data and the resourceVersion it was read at."""

    def __init__(self, name: str, data: Mapping[str, str], resource_version: str) -> None:
        self.name = name
        self.data = dict(data)
        self.resource_version = resource_version


def state_object_name(rollout: str) -> str:
    return f"{ROLLOUT_CONFIGMAP_PREFIX}{rollout}"


class RolloutApi:
    def __init__(self, api_client: ApiClient, *, clock: Clock, namespace: str = ROLLOUT_NAMESPACE) -> None:
        self._core = CoreV1Api(api_client)
        self._policy = PolicyV1Api(api_client)
        self._clock = clock
        self.namespace = namespace

    # --- the pool ---------------------------------------------------------------------------------

    def list_nodes(self, selector: str) -> list[NodeView]:
        call = f"list nodes -l {selector}"

        def read() -> list[NodeView]:
            with classified(call):
                listing = self._core.list_node(label_selector=selector or None, _request_timeout=_TIMEOUT_S)
            return sorted((node_view(item) for item in listing.items or ()), key=lambda n: n.name)

        return call_with_retries(call, read, clock=self._clock)

    def set_layout(self, node: str, layout: str | None) -> NodeView:
        """Patch `nvidia.com/mig.config` of `node` and nothing else (None removes it)."""
        call = f"label node {node} {MIG_CONFIG_LABEL}={layout}"
        body = {"metadata": {"labels": {MIG_CONFIG_LABEL: layout}}}

        def write() -> NodeView:
            with classified(call):
                return node_view(self._core.patch_node(node, body, _request_timeout=_TIMEOUT_S))

        return call_with_retries(call, write, clock=self._clock)

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
        call = f"list configmaps in namespace {self.namespace}"
        with classified(call):
            listing = self._core.list_namespaced_config_map(self.namespace, _request_timeout=_TIMEOUT_S)
        found = [
            item for item in listing.items or ()
            if item.metadata and (item.metadata.name or "").startswith(LAYOUTS_CONFIGMAP_PREFIX)
            and LAYOUTS_CONFIGMAP_KEY in (item.data or {})
        ]
        if not found:
            raise PermanentError(
                f"no ConfigMap {LAYOUTS_CONFIGMAP_PREFIX}* with key {LAYOUTS_CONFIGMAP_KEY} in namespace"
                f" {self.namespace}: deploy migagent (deploy/) or give the layout file with -f"
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
            return _stored(rollout, item)

        return call_with_retries(call, read, clock=self._clock)

    def list_states(self) -> list[StoredState]:
        call = f"list configmaps -l {ROLLOUT_LABEL} in namespace {self.namespace}"
        with classified(call):
            listing = self._core.list_namespaced_config_map(
                self.namespace, label_selector=ROLLOUT_LABEL, _request_timeout=_TIMEOUT_S
            )
        return [
            _stored(str((item.metadata.labels or {}).get(ROLLOUT_LABEL, "")), item)
            for item in listing.items or ()
            if item.metadata is not None
        ]

    def create_state(self, rollout: str, data: Mapping[str, str]) -> str:
        """Create the object; StateConflictError when it exists already. Returns its resourceVersion."""
        name = state_object_name(rollout)
        body = V1ConfigMap(
            metadata=V1ObjectMeta(name=name, namespace=self.namespace, labels={ROLLOUT_LABEL: rollout}),
            data=dict(data),
        )
        return self._conditional(
            f"create configmap {self.namespace}/{name}",
            lambda: self._core.create_namespaced_config_map(self.namespace, body, _request_timeout=_TIMEOUT_S),
        )

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


def _stored(rollout: str, item: V1ConfigMap) -> StoredState:
    metadata = item.metadata
    return StoredState(rollout, item.data or {}, str(metadata.resource_version or "") if metadata else "")
