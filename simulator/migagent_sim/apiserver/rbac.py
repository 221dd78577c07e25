"""Authentication by bearer token and RBAC authorization, as the API server does them for a request.

`UserInfo` is what the authenticator hands on: a projected service-account token bound to a pod
becomes `system:serviceaccount:<ns>:<name>` with the groups `system:serviceaccounts`,
`system:serviceaccounts:<ns>` and `system:authenticated`, and the pod's node in the extra key
`authentication.kubernetes.io/node-name` (KEP-4193, GA in 1.32).

`RbacAuthorizer` follows rbac/v1 PolicyRule semantics: a request is allowed when a rule bound to the
user (ServiceAccount, User or Group subject) lists its API group, its resource (`plural/subresource`
for a subresource), its verb and, if the rule has resourceNames, the object's name. A ClusterRole
bound by a ClusterRoleBinding applies everywhere; a Role or ClusterRole bound by a RoleBinding
applies only to namespaced objects in the binding's namespace. `*` matches anything.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from migagent_sim.apiserver.errors import ApiError, qualified

JsonDict = dict[str, Any]
NODE_NAME_CLAIM = "authentication.kubernetes.io/node-name"
_SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class UserInfo:
    username: str
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def service_account(cls, namespace: str, name: str, *, node_name: str | None = None) -> UserInfo:
        """The identity of a pod-bound service-account token (with the node claim when `node_name` is set)."""
        groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated")
        extra = {NODE_NAME_CLAIM: (node_name,)} if node_name else {}
        return cls(f"{_SA_PREFIX}{namespace}:{name}", groups, extra)

    def as_admission(self) -> JsonDict:
        """`request.userInfo` as admission sees it: `extra` only when the user has some (the API's
        `omitempty`), so `request.userInfo.extra` fails to evaluate for one without, as on the real server."""
        info: JsonDict = {"username": self.username, "groups": list(self.groups)}
        if self.extra:
            info["extra"] = {k: list(v) for k, v in self.extra.items()}
        return info


@dataclass(frozen=True)
class Attributes:
    """One authorization question: may the user do `verb` on group/resource[/subresource] (name) in namespace?"""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""  # "" for cluster-scoped objects and cluster-wide lists
    name: str = ""

    @property
    def rbac_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    def forbidden(self, user: UserInfo) -> ApiError:
        """403 worded like the RBAC authorizer's refusal."""
        what = qualified(self.resource, self.group)
        subject = f'{what} "{self.name}"' if self.name else what
        where = f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        message = (
            f'{subject} is forbidden: User "{user.username}" cannot {self.verb} resource "{self.rbac_resource}"'
            f' in API group "{self.group}" {where}'
        )
        return ApiError(403, message, name=self.name or None, kind=self.resource, group=self.group)


@dataclass(frozen=True)
class _Grant:
    rule: JsonDict
    namespace: str | None  # None: cluster-wide (ClusterRoleBinding)

    def allows(self, attributes: Attributes) -> bool:
        rule = self.rule
        if self.namespace is not None and attributes.namespace != self.namespace:
            return False
        names = rule.get("resourceNames") or []
        return (
            _listed(attributes.verb, rule.get("verbs"))
            and _listed(attributes.group, rule.get("apiGroups"))
            and _listed(attributes.rbac_resource, rule.get("resources"))
            and (not names or attributes.name in names)
        )


def _listed(value: str, allowed: Sequence[str] | None) -> bool:
    return bool(allowed) and ("*" in allowed or value in allowed)  # type: ignore[operator]


class RbacAuthorizer:
    """RBAC over a fixed set of Role/ClusterRole/RoleBinding/ClusterRoleBinding objects (e.g. rendered deploy/)."""

    def __init__(self, objects: Iterable[JsonDict]) -> None:
        objects = list(objects)
        self._roles = {
            (o["kind"], o["metadata"].get("namespace", "") if o["kind"] == "Role" else "", o["metadata"]["name"]): o
            for o in objects
            if o.get("kind") in ("Role", "ClusterRole")
        }
        self._bindings = [o for o in objects if o.get("kind") in ("RoleBinding", "ClusterRoleBinding")]
        self._lock = threading.Lock()
        self._decisions: list[tuple[UserInfo, Attributes, bool]] = []

    def allowed(self, user: UserInfo, attributes: Attributes) -> bool:
        decision = any(grant.allows(attributes) for grant in self._grants(user))
        with self._lock:
            self._decisions.append((user, attributes, decision))
        return decision

    def authorize(self, user: UserInfo, attributes: Attributes) -> None:
        if not self.allowed(user, attributes):
            raise attributes.forbidden(user)

    def decisions(self) -> list[tuple[UserInfo, Attributes, bool]]:
        """Every question asked so far (requests and admission's `authorizer` checks), with its answer."""
        with self._lock:
            return list(self._decisions)

    def _grants(self, user: UserInfo) -> Iterable[_Grant]:
        for binding in self._bindings:
            if not any(_subject_is(subject, user) for subject in binding.get("subjects") or []):
                continue
            ref = binding["roleRef"]
            namespace = binding["metadata"].get("namespace", "") if binding["kind"] == "RoleBinding" else None
            role_namespace = namespace or "" if ref["kind"] == "Role" else ""  # ClusterRoles have none
            role = self._roles.get((ref["kind"], role_namespace, ref["name"]))
            for rule in (role or {}).get("rules") or []:
                yield _Grant(rule, namespace)


def _subject_is(subject: JsonDict, user: UserInfo) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "ServiceAccount":
        return user.username == f"{_SA_PREFIX}{subject.get('namespace', '')}:{name}"
    if kind == "User":
        return user.username == name
    return kind == "Group" and name in user.groups
