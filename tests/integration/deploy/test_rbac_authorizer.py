"""The small authorizer the RBAC check relies on follows RBAC's rules (pure: no cluster, no kubectl)."""

from __future__ import annotations

from typing import Any

from tests.integration.deploy.rbac import ApiCall, permissions_of

AGENT = ("migagent", "migagent")


def role(kind: str, name: str, rules: list[dict[str, Any]], namespace: str | None = None) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"kind": kind, "metadata": metadata, "rules": rules}


def binding(
    kind: str, role_kind: str, name: str, *, account: tuple[str, str] = AGENT, namespace: str | None = None
) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    subject = {"kind": "ServiceAccount", "namespace": account[0], "name": account[1]}
    return {"kind": kind, "metadata": metadata, "roleRef": {"kind": role_kind, "name": name}, "subjects": [subject]}


def rule(group: str, resource: str, *verbs: str, names: tuple[str, ...] = ()) -> dict[str, Any]:
    found: dict[str, Any] = {"apiGroups": [group], "resources": [resource], "verbs": list(verbs)}
    if names:
        found["resourceNames"] = list(names)
    return found


def allowed(objects: list[dict[str, Any]], call: ApiCall) -> bool:
    return any(p.allows(call) for p in permissions_of(objects, service_account=AGENT))


def test_a_role_bound_in_one_namespace_allows_nothing_in_another() -> None:
    objects = [
        role("Role", "plugin", [rule("", "pods", "delete")], namespace="nvidia-device-plugin"),
        binding("RoleBinding", "Role", "plugin", namespace="nvidia-device-plugin"),
    ]
    assert allowed(objects, ApiCall("delete", "", "pods", "", "nvidia-device-plugin", "p"))
    assert not allowed(objects, ApiCall("delete", "", "pods", "", "ml", "p"))


def test_a_cluster_role_bound_cluster_wide_applies_in_every_namespace_and_to_cluster_objects() -> None:
    objects = [
        role("ClusterRole", "agent", [rule("", "pods", "list")]),
        binding("ClusterRoleBinding", "ClusterRole", "agent"),
    ]
    assert allowed(objects, ApiCall("list", "", "pods", "", "ml"))
    assert allowed(objects, ApiCall("list", "", "pods", "", ""))


def test_a_grant_on_a_resource_does_not_cover_its_subresources_or_other_groups() -> None:
    objects = [
        role("ClusterRole", "agent", [rule("", "pods", "create")]),
        binding("ClusterRoleBinding", "ClusterRole", "agent"),
    ]
    assert not allowed(objects, ApiCall("create", "", "pods", "eviction", "ml", "p"))
    assert not allowed(objects, ApiCall("create", "apps", "pods", "", "ml"))
    assert not allowed(objects, ApiCall("delete", "", "pods", "", "ml", "p"))


def test_resource_names_limit_a_rule_to_the_named_objects() -> None:
    rules = [rule("", "nodes", "patch", names=("gpu-1",))]
    objects = [role("ClusterRole", "agent", rules), binding("ClusterRoleBinding", "ClusterRole", "agent")]
    assert allowed(objects, ApiCall("patch", "", "nodes", "", "", "gpu-1"))
    assert not allowed(objects, ApiCall("patch", "", "nodes", "", "", "gpu-2"))


def test_a_binding_for_another_service_account_grants_the_agent_nothing() -> None:
    objects = [
        role("ClusterRole", "other", [rule("", "nodes", "get")]),
        binding("ClusterRoleBinding", "ClusterRole", "other", account=("kube-system", "other")),
    ]
    assert permissions_of(objects, service_account=AGENT) == []
