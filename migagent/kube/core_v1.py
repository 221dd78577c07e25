"""`CoreV1Calls`: the core/v1 requests a node agent makes, sent through the client's own `ApiClient`
(its serialization, authentication, TLS, REST layer and model deserialization) without the generated
`CoreV1Api`.

Why not `CoreV1Api`: `kubernetes.client.api.core_v1_api` is one 63,000-line module whose import keeps
about 12.6 MiB resident, and its imports bring in the model tree of every core/v1 kind (V1Pod's alone
is about 7 MiB) into an agent that runs on every GPU node and is idle nearly all the time. Here a
model is loaded when a response of its kind is first read (`kubernetes.client.models` imports lazily).

Each method keeps the generated method's name, positional arguments, keyword arguments and return
value, so nodes.py, pods.py, events.py and cluster_reads.py take either one.
`tests/integration/kube/test_core_v1_calls.py` holds each method to the generated one's request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

# The generated methods' keyword arguments the agent uses, and their query parameter names.
_QUERY_PARAMETERS = {
    "field_selector": "fieldSelector",
    "label_selector": "labelSelector",
    "resource_version": "resourceVersion",
    "timeout_seconds": "timeoutSeconds",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "watch": "watch",
    "grace_period_seconds": "gracePeriodSeconds",
}
# An object patch of a built-in kind is a strategic merge (None values delete keys), as the client's
# REST layer sends a dict body that the generated method labels as a JSON patch.
_STRATEGIC_MERGE = "application/strategic-merge-patch+json"
_JSON = "application/json"


class CoreV1Calls:
    """The subset of `CoreV1Api` that the agent, `migagent status` and rollout events call."""

    def __init__(self, api_client: ApiClient) -> None:
        self._api = api_client

    # --- nodes ---
    def read_node(self, name: str, *, _request_timeout: Any = None) -> Any:
        """GET the Node: a V1Node."""
        return self._send("GET", "/api/v1/nodes/{name}", {"name": name}, "V1Node", timeout=_request_timeout)

    def patch_node(self, name: str, body: Mapping[str, Any], *, _request_timeout: Any = None) -> Any:
        """A strategic-merge patch of the Node: the V1Node written."""
        return self._send(
            "PATCH", "/api/v1/nodes/{name}", {"name": name}, "V1Node", body=body, content_type=_STRATEGIC_MERGE,
            timeout=_request_timeout,
        )

    def patch_node_status(self, name: str, body: Mapping[str, Any], *, _request_timeout: Any = None) -> Any:
        """A strategic-merge patch of the Node's status subresource: the V1Node written."""
        return self._send(
            "PATCH", "/api/v1/nodes/{name}/status", {"name": name}, "V1Node", body=body,
            content_type=_STRATEGIC_MERGE, timeout=_request_timeout,
        )

    def list_node(self, *, _preload_content: bool = True, _request_timeout: Any = None, **query: Any) -> Any:
        """A V1NodeList; with `watch=True, _preload_content=False` (what `kubernetes.watch.Watch` passes)
        the open HTTP response whose lines are the watch events."""
        return self._send(
            "GET", "/api/v1/nodes", {}, "V1NodeList", query=query, preload=_preload_content,
            timeout=_request_timeout,
        )

    # --- pods ---
    def list_pod_for_all_namespaces(self, *, _request_timeout: Any = None, **query: Any) -> Any:
        """A V1PodList."""
        return self._send("GET", "/api/v1/pods", {}, "V1PodList", query=query, timeout=_request_timeout)

    def list_namespaced_pod(self, namespace: str, *, _request_timeout: Any = None, **query: Any) -> Any:
        """A V1PodList."""
        return self._send(
            "GET", "/api/v1/namespaces/{namespace}/pods", {"namespace": namespace}, "V1PodList", query=query,
            timeout=_request_timeout,
        )

    def create_namespaced_pod_eviction(
        self, name: str, namespace: str, body: Any, *, _request_timeout: Any = None
    ) -> None:
        """POST an Eviction. The server answers with a Status, which nobody reads: not deserialized."""
        self._send(
            "POST", "/api/v1/namespaces/{namespace}/pods/{name}/eviction", {"name": name, "namespace": namespace},
            None, body=body, timeout=_request_timeout,
        )

    def delete_namespaced_pod(
        self, name: str, namespace: str, *, body: Any = None, _request_timeout: Any = None, **query: Any
    ) -> None:
        """DELETE the pod (`grace_period_seconds`, a V1DeleteOptions body). The pod returned is not read."""
        self._send(
            "DELETE", "/api/v1/namespaces/{namespace}/pods/{name}", {"name": name, "namespace": namespace}, None,
            query=query, body=body, timeout=_request_timeout,
        )

    # --- events and configmaps ---
    def create_namespaced_event(self, namespace: str, body: Any, *, _request_timeout: Any = None) -> Any:
        """POST a core/v1 Event: the CoreV1Event created."""
        return self._send(
            "POST", "/api/v1/namespaces/{namespace}/events", {"namespace": namespace}, "CoreV1Event", body=body,
            timeout=_request_timeout,
        )

    def read_namespaced_config_map(self, name: str, namespace: str, *, _request_timeout: Any = None) -> Any:
        """GET a ConfigMap: a V1ConfigMap."""
        return self._send(
            "GET", "/api/v1/namespaces/{namespace}/configmaps/{name}", {"name": name, "namespace": namespace},
            "V1ConfigMap", timeout=_request_timeout,
        )

    def _send(
        self,
        method: str,
        path: str,
        path_params: Mapping[str, str],
        response_type: str | None,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        preload: bool = True,
        timeout: Any = None,
    ) -> Any:
        # As the generated methods send them: a POST or DELETE body is JSON without a Content-Type (the API
        # server reads JSON by default); only a PATCH names its kind.
        headers = {"Accept": _JSON} | ({"Content-Type": content_type} if content_type else {})
        request = self._api.param_serialize(
            method=method,
            resource_path=path,
            path_params=dict(path_params),
            query_params=_query_parameters(query or {}),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self._api.call_api(*request, _request_timeout=timeout)
        if not preload:
            # What the generated method does for a streamed read: an error status raises, otherwise the
            # caller reads the open response.
            if not 200 <= response.status <= 299:
                response.read()  # type: ignore[no-untyped-call]
                raise ApiException.from_response(http_resp=response, body=None, data=None)
            return response.response
        response.read()  # type: ignore[no-untyped-call]
        types = {"200": response_type, "201": response_type, "202": response_type} if response_type else {}
        return self._api.response_deserialize(response_data=response, response_types_map=types).data


def _query_parameters(query: Mapping[str, Any]) -> list[tuple[str, Any]]:
    unknown = sorted(set(query) - set(_QUERY_PARAMETERS))
    if unknown:
        raise TypeError(f"CoreV1Calls: unsupported query argument(s) {', '.join(unknown)}")
    # In the generated methods' order (the OpenAPI spec lists query parameters by name).
    return sorted((_QUERY_PARAMETERS[name], value) for name, value in query.items() if value is not None)
