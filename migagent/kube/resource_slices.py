"""The one reader of this node's ResourceSlices of a DRA driver, as plain JSON.

It asks for the newest `resource.k8s.io` version the server serves (v1, then v1beta2, v1beta1), by
the field selectors `spec.nodeName` and `spec.driver` (which the API server supports for them).
A server that serves none of them, or whose RBAC grants no list (403), answers None: what that means
is the caller's. Preflight reads it as "no other MIG manager publishes here"; the DRA driver's
advertisement wait cannot see what it waits for and fails saying so. Transient errors are retried.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from migagent.clock import Clock
from migagent.kube.classify import call_with_retries, classified
from migagent.kube.client import lazy_custom_objects
from migagent.kube.timeouts import RequestTimeout
from migagent.node.dra import SliceDevice

JsonDict = dict[str, Any]

VERSIONS = ("v1", "v1beta2", "v1beta1")
_NOT_SERVED = 404
_FORBIDDEN = 403


class ResourceSliceReader:
    def __init__(self, api_client: ApiClient, *, clock: Clock, timeout: RequestTimeout) -> None:
        self._custom = lazy_custom_objects(api_client)  # built at the first read
        self._clock = clock
        self._timeout = timeout

    def read(self, *, node_name: str, driver: str) -> list[JsonDict] | None:
        """The slices `driver` publishes for `node_name`; None when no version is served or RBAC says 403."""
        selector = f"spec.nodeName={node_name},spec.driver={driver}"
        for version in VERSIONS:
            listed = self._list(version, selector, f"list resourceslices ({version}) of {driver} on node {node_name}")
            if listed == _NOT_SERVED:
                continue
            if listed == _FORBIDDEN:
                return None
            items = listed.get("items") if isinstance(listed, dict) else None
            return [item for item in items or [] if isinstance(item, dict)]
        return None

    def _list(self, version: str, selector: str, call: str) -> object:
        """The list's answer, or the HTTP status of a 404 or 403 (retrying transient errors)."""

        def once() -> object:
            with classified(call):
                try:
                    return self._custom().list_cluster_custom_object(
                        "resource.k8s.io", version, "resourceslices", field_selector=selector,
                        _request_timeout=self._timeout.request,
                    )
                except ApiException as error:
                    if error.status in (_NOT_SERVED, _FORBIDDEN):
                        return error.status
                    raise

        return call_with_retries(call, once, clock=self._clock, budget_s=self._timeout.call_budget)


def slice_devices(slices: Sequence[JsonDict]) -> list[SliceDevice]:
    """Every device of `slices`, with its string attributes (`type`, `uuid`, `profile`, ...)."""
    devices: list[SliceDevice] = []
    for item in slices:
        for device in (item.get("spec") or {}).get("devices") or ():
            if not isinstance(device, dict):
                continue
            attributes = device.get("attributes") or (device.get("basic") or {}).get("attributes") or {}
            strings = {
                str(key): str(value["string"])
                for key, value in attributes.items()
                if isinstance(value, dict) and value.get("string") is not None
            }
            devices.append(SliceDevice(str(device.get("name", "")), strings))
    return devices
