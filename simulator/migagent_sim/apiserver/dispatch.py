"""Which handler answers which (method, resource, subresource); HTTP-free so the rules read in one place."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from migagent.clock import Clock, SystemClock
from migagent_sim.apiserver.configmaps import create_configmap, delete_configmap, replace_configmap
from migagent_sim.apiserver.errors import ApiError, bad_request, success_status
from migagent_sim.apiserver.events import create_event
from migagent_sim.apiserver.leases import create_lease, replace_lease
from migagent_sim.apiserver.nodes import patch_node, replace_node
from migagent_sim.apiserver.pods import create_pod, delete_pod, evict_pod
from migagent_sim.apiserver.rbac import UserInfo
from migagent_sim.apiserver.reads import get_object, list_objects, open_watch
from migagent_sim.apiserver.routing import (
    CONFIGMAPS,
    CORE_EVENTS,
    EVENTS_V1,
    LEASES,
    NODES,
    PODS,
    ResourceType,
    Route,
    is_watch,
)
from migagent_sim.apiserver.store import Store
from migagent_sim.apiserver.terminating import Terminator
from migagent_sim.apiserver.watch import WatchEnd

JsonDict = dict[str, Any]
_JSON_MEDIA_TYPES = ("application/json", "")


class EventSource(Protocol):
    def run(self, write: Any) -> WatchEnd: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ApiRequest:
    method: str
    path: str
    route: Route
    query: Mapping[str, str]
    body: bytes
    content_type: str | None
    user: UserInfo | None = None
    """Who sent it, when the server authenticates (None: access control is off)."""


@dataclass(frozen=True)
class JsonResponse:
    status: int
    body: JsonDict
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WatchSettings:
    default_timeout_s: float
    bookmark_interval_s: float


def decode_body(request: ApiRequest, *, is_patch: bool = False) -> Any:
    """JSON body; POST/PUT without Content-Type are JSON (the apiserver's first serializer), like the client sends."""
    media_type = (request.content_type or "").split(";")[0].strip().lower()
    if not is_patch and media_type not in _JSON_MEDIA_TYPES:
        raise ApiError(415, f"the body of the request was in an unknown format ({media_type}); use application/json")
    if not request.body:
        return None
    try:
        return json.loads(request.body)
    except ValueError as error:
        raise bad_request(f"the request body is not valid JSON: {error}") from error


class NodeAdmission(Protocol):
    def admit_node(self, request: ApiRequest, old: JsonDict, new: JsonDict) -> None: ...

    def admit_pod_delete(self, request: ApiRequest, pod: JsonDict) -> None: ...


class Dispatcher:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        watch: WatchSettings,
        *,
        admission: NodeAdmission | None = None,
        terminator: Terminator | None = None,
    ) -> None:
        self._store = store
        self._terminator = terminator
        self._admission = admission
        self._clock = clock
        self._watch = watch
        self._watch_clock = SystemClock()  # watch timeouts are network time, whatever clock stamps the objects

    def handle(self, request: ApiRequest) -> JsonResponse | EventSource:
        resource = request.route.resource_type
        if resource is None:
            raise ApiError(404, "the server could not find the requested resource")
        method = request.method.upper()
        if method == "GET":
            return self._get(resource, request)
        if method in ("PATCH", "PUT") and resource == NODES:
            return self._write_node(request)
        if method == "POST":
            return self._post(resource, request)
        if resource in (LEASES, CONFIGMAPS) and request.route.name and not request.route.subresource:
            answer = self._named_object(resource, method, request)
            if answer is not None:
                return answer
        if method == "DELETE" and resource == PODS and request.route.name and not request.route.subresource:
            options = decode_body(request) or {}
            stored = self._store.get(PODS, request.route.namespace or "", request.route.name)
            if self._admission is not None and stored is not None:
                self._admission.admit_pod_delete(request, stored)
            pod = delete_pod(
                self._store,
                request.route.namespace or "",
                request.route.name,
                options=options,
                query=request.query,
                clock=self._clock,
                terminator=self._terminator,
            )
            return JsonResponse(200, pod)
        raise ApiError(405, f"{method} is not supported on {request.path} by this fake apiserver")

    def _named_object(self, resource: ResourceType, method: str, request: ApiRequest) -> JsonResponse | None:
        """PUT of a Lease, PUT and DELETE of a ConfigMap (conditional on the resourceVersion sent)."""
        namespace, name = request.route.namespace or "", request.route.name or ""
        if method == "PUT" and resource == LEASES:
            return JsonResponse(200, replace_lease(self._store, namespace, name, decode_body(request)))
        if method == "PUT" and resource == CONFIGMAPS:
            return JsonResponse(200, replace_configmap(self._store, namespace, name, decode_body(request)))
        if method == "DELETE" and resource == CONFIGMAPS:
            return JsonResponse(200, delete_configmap(self._store, namespace, name))
        return None

    def _get(self, resource: ResourceType, request: ApiRequest) -> JsonResponse | EventSource:
        route = request.route
        if route.subresource not in (None, "status"):
            raise ApiError(
                404, f"the server could not find the requested resource ({route.plural}/{route.subresource})"
            )
        if route.name is not None:
            return JsonResponse(200, get_object(self._store, resource, route))
        if is_watch(request.query):
            return open_watch(
                self._store,
                resource,
                route,
                request.query,
                default_timeout_s=self._watch.default_timeout_s,
                bookmark_interval_s=self._watch.bookmark_interval_s,
                clock=self._watch_clock,
            )
        return JsonResponse(200, list_objects(self._store, resource, route, request.query))

    def _write_node(self, request: ApiRequest) -> JsonResponse:
        route = request.route
        if route.name is None:
            raise ApiError(405, f"{request.method} needs a node name in the path")
        admission = self._admission
        admit = None if admission is None else (lambda old, new: admission.admit_node(request, old, new))
        if request.method.upper() == "PATCH":
            document = decode_body(request, is_patch=True)
            node = patch_node(self._store, route.name, route.subresource, request.content_type, document, admit=admit)
        else:
            node = replace_node(self._store, route.name, route.subresource, decode_body(request), admit=admit)
        return JsonResponse(200, node)

    def _post(self, resource: ResourceType, request: ApiRequest) -> JsonResponse:
        route = request.route
        namespace = route.namespace or ""
        if resource == PODS and route.subresource == "eviction" and route.name:
            evict_pod(
                self._store, namespace, route.name, decode_body(request), clock=self._clock, terminator=self._terminator
            )
            return JsonResponse(201, success_status(201))
        if route.name is not None or route.namespace is None:
            raise ApiError(405, f"POST is not supported on {request.path}")
        if resource in (CORE_EVENTS, EVENTS_V1):
            return JsonResponse(201, create_event(self._store, resource, namespace, decode_body(request)))
        if resource == PODS:
            return JsonResponse(201, create_pod(self._store, namespace, decode_body(request)))
        if resource == CONFIGMAPS:
            return JsonResponse(201, create_configmap(self._store, namespace, decode_body(request)))
        if resource == LEASES:
            return JsonResponse(201, create_lease(self._store, namespace, decode_body(request)))
        raise ApiError(405, f"POST is not supported on {request.path} by this fake apiserver")
