"""A small RBAC authorizer over rendered manifests, to compare grants with the calls the agent made.

It follows the RBAC rule semantics of the API server (rbac/v1 PolicyRule): a request is allowed
when some rule bound to the subject lists its API group, its resource (`resource/subresource` for
a subresource), its verb, and, if the rule has resourceNames, its object name. A ClusterRole bound
by a ClusterRoleBinding applies in every namespace; a Role or ClusterRole bound by a RoleBinding
applies only in the binding's namespace. `*` wildcards are honoured but the manifests must not use
them (a test says so).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

CLUSTER_WIDE = None


@dataclass(frozen=True, order=True)
class ApiCall:
    """One request as RBAC sees it. `namespace` is "" for cluster-scoped objects (nodes)."""

    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str = ""

    @property
    def rbac_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        group = self.group or "core"
        return f"{self.verb} {group}/{self.rbac_resource}{where}"


@dataclass(frozen=True, order=True)
class Permission:
    """One (verb, group, resource) a rule grants, with where it applies and which rule it came from."""

    verb: str
    group: str
    resource: str
    namespace: str | None  # CLUSTER_WIDE or the one namespace a RoleBinding grants it in
    resource_names: tuple[str, ...]
    source: str

    def allows(self, call: ApiCall) -> bool:
        return (
            self.verb in (call.verb, "*")
            and self.group in (call.group, "*")
            and self.resource in (call.rbac_resource, "*")
            and (self.namespace is CLUSTER_WIDE or self.namespace == call.namespace)
            and (not self.resource_names or call.name in self.resource_names)
        )

    def __str__(self) -> str:
        where = "cluster-wide" if self.namespace is CLUSTER_WIDE else f"in {self.namespace}"
        return f"{self.verb} {self.group or 'core'}/{self.resource} {where} ({self.source})"


def permissions_of(objects: list[Obj], *, service_account: tuple[str, str]) -> list[Permission]:
    """Every permission the rendered objects grant to the service account (namespace, name)."""
    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects}
    granted: list[Permission] = []
    for binding in objects:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding") or not _binds(binding, service_account):
            continue
        ref = binding["roleRef"]
        binding_namespace = binding["metadata"].get("namespace", "")
        role_namespace = binding_namespace if ref["kind"] == "Role" else ""
        role = roles.get((ref["kind"], role_namespace, ref["name"]))
        assert role is not None, f"{binding['kind']} {binding['metadata']['name']} refers to a missing {ref}"
        scope = CLUSTER_WIDE if binding["kind"] == "ClusterRoleBinding" else binding_namespace
        source = f"{role['kind']} {role['metadata']['name']} via {binding['kind']} {binding['metadata']['name']}"
        granted.extend(_expand(role.get("rules", []), scope=scope, source=source))
    return granted


def _binds(binding: Obj, service_account: tuple[str, str]) -> bool:
    namespace, name = service_account
    return any(
        s["kind"] == "ServiceAccount" and s["name"] == name and s.get("namespace") == namespace
        for s in binding.get("subjects", [])
    )


def _expand(rules: Iterable[Obj], *, scope: str | None, source: str) -> Iterator[Permission]:
    for index, rule in enumerate(rules):
        assert not rule.get("nonResourceURLs"), f"{source} rule {index}: the agent uses no non-resource URLs"
        names = tuple(rule.get("resourceNames", ()))
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    yield Permission(verb, group, resource, scope, names, f"{source}, rule {index}")
