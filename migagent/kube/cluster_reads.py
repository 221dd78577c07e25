"""Read-only looks at objects other components own: the device plugin's ConfigMap, the DRA driver's
ResourceSlices. Each needs its own grant (deploy/: `get` on the one ConfigMap by resourceNames,
`list` on resourceslices cluster-wide, which RBAC cannot scope to one node).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from migagent.clock import Clock
from migagent.errors import PermanentError
from migagent.kube.classify import call_with_retries, classified
from migagent.kube.core_v1 import CoreV1Calls
from migagent.kube.resource_slices import VERSIONS, ResourceSliceReader, slice_devices
from migagent.kube.timeouts import RequestTimeout
from migagent.node.dra import SliceDevice

_HTTP_NOT_FOUND = 404


class ClusterReads:
    def __init__(self, api_client: ApiClient, *, clock: Clock, timeout: RequestTimeout | None = None) -> None:
        self._core = CoreV1Calls(api_client)
        self._clock = clock
        self._timeout = timeout or RequestTimeout()
        self._slices = ResourceSliceReader(api_client, clock=clock, timeout=self._timeout)

    def read_config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        """The ConfigMap's data; None when it does not exist."""
        call = f"get configmap {namespace}/{name}"

        def read() -> Mapping[str, str] | None:
            with classified(call):
                try:
                    found = self._core.read_namespaced_config_map(
                        name, namespace, _request_timeout=self._timeout.request
                    )
                except ApiException as error:
                    if error.status == _HTTP_NOT_FOUND:
                        return None
                    raise
            return dict(found.data or {})

        return call_with_retries(call, read, clock=self._clock)

    def list_slice_devices(self, *, node_name: str, driver: str) -> list[SliceDevice]:
        """Every device in the ResourceSlices `driver` publishes for `node_name` (kube.resource_slices)."""
        slices = self._slices.read(node_name=node_name, driver=driver)
        if slices is None:
            raise PermanentError(
                f"cannot list the ResourceSlices of {driver} on {node_name}: the API server serves no"
                f" resource.k8s.io version of them ({', '.join(VERSIONS)}) or RBAC grants no list on"
                " resourceslices (deploy/components/dra-driver grants it)"
            )
        return slice_devices(slices)
