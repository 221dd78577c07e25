"""Reads of what other MIG managers publish: this node's ResourceSlices and the GPU Operator's
ClusterPolicy, as plain JSON (CustomObjectsApi), so an API server without them (no DRA, no operator)
is simply "none", as is a 403 where RBAC grants no read. What they mean is `node.owners`.
"""

from __future__ import annotations

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from migagent.clock import Clock
from migagent.kube.classify import classified
from migagent.kube.client import lazy_custom_objects
from migagent.kube.resource_slices import ResourceSliceReader
from migagent.kube.timeouts import RequestTimeout
from migagent.node.owners import CLUSTER_POLICY_NAME, DRA_GPU_DRIVER, JsonDict

_ABSENT = (403, 404)


class OwnerReads:
    """ResourceSlices for this node and the ClusterPolicy, as JSON; absent APIs and objects read as empty."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        node_name: str,
        timeout: RequestTimeout,
        clock: Clock,
        policy: str | None = CLUSTER_POLICY_NAME,
    ) -> None:
        """`policy`: the ClusterPolicy's name (None: there is no GPU Operator to ask, never read it)."""
        self._custom = lazy_custom_objects(api_client)  # built at the first ClusterPolicy read
        self._slices = ResourceSliceReader(api_client, clock=clock, timeout=timeout)
        self._node_name = node_name
        self._timeout = timeout
        self._policy = policy

    def resource_slices(self, driver: str = DRA_GPU_DRIVER) -> list[JsonDict]:
        """This node's ResourceSlices of `driver`; none where DRA is not served or not readable to us."""
        return self._slices.read(node_name=self._node_name, driver=driver) or []

    def cluster_policy(self) -> JsonDict | None:
        """The GPU Operator's ClusterPolicy, or None (no operator, another name, or no grant to read it)."""
        name = self._policy
        if name is None:
            return None
        with classified(f"get clusterpolicy {name}"):
            try:
                found = self._custom().get_cluster_custom_object(
                    "nvidia.com", "v1", "clusterpolicies", name, _request_timeout=self._timeout.request
                )
            except ApiException as error:
                if error.status in _ABSENT:
                    return None
                raise
        return found if isinstance(found, dict) else None
