"""URL layout of the served resources and the RBAC verb each request needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def key(self) -> str:
        """Store key; the two Event APIs are kept apart because their schemas differ."""
        return f"{self.group}/{self.plural}" if self.group else self.plural


NODES = ResourceType("", "v1", "nodes", "Node", namespaced=False)
PODS = ResourceType("", "v1", "pods", "Pod", namespaced=True)
CORE_EVENTS = ResourceType("", "v1", "events", "Event", namespaced=True)
EVENTS_V1 = ResourceType("events.k8s.io", "v1", "events", "Event", namespaced=True)
DAEMONSETS = ResourceType("apps", "v1", "daemonsets", "DaemonSet", namespaced=True)
PDBS = ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
RESOURCESLICES = ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False)
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
CLUSTER_POLICIES = ResourceType("nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", namespaced=False)
"""The GPU Operator's ClusterPolicy custom resource (served only as a test puts one in)."""

RESOURCE_TYPES = (
    NODES, PODS, CORE_EVENTS, EVENTS_V1, DAEMONSETS, PDBS, CONFIGMAPS, RESOURCESLICES, LEASES, CLUSTER_POLICIES
)
_BY_GROUP_VERSION_PLURAL = {(r.group, r.version, r.plural): r for r in RESOURCE_TYPES}


@dataclass(frozen=True)
class Route:
    """A parsed request path; `resource_type` is None for paths this server does not serve."""

    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    subresource: str | None
    resource_type: ResourceType | None


_UNKNOWN = Route("", "", "", None, None, None, None)


def parse_route(path: str) -> Route:
    """Split `/api/v1/namespaces/ns/pods/p/eviction` or `/apis/apps/v1/daemonsets` into its parts."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":  # the core group has no group segment
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return _UNKNOWN
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":  # "namespaces/<ns>/<plural>"
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:  # plural[/name[/subresource]]
        return _UNKNOWN
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    resource_type = _BY_GROUP_VERSION_PLURAL.get((group, version, plural))
    if resource_type is not None and not resource_type.namespaced and namespace is not None:
        resource_type = None
    if resource_type is not None and resource_type.namespaced and name is not None and namespace is None:
        resource_type = None
    return Route(group, version, plural, namespace, name, subresource, resource_type)


def is_watch(query: Mapping[str, str]) -> bool:
    return query.get("watch", "").lower() in ("true", "1")


def rbac_verb(method: str, route: Route, query: Mapping[str, str]) -> str:
    """The verb an RBAC rule must grant: GET splits into get/list/watch, DELETE into delete/deletecollection."""
    method = method.upper()
    if method == "GET":
        if is_watch(query):
            return "watch"
        return "get" if route.name is not None else "list"
    if method == "DELETE":
        return "delete" if route.name is not None else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())
