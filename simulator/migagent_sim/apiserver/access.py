"""Authentication, authorization and validating admission for the fake API server, in the request path.

Off by default (every request is served, as before). With an `AccessControl`, the server answers as a
real one with RBAC and ValidatingAdmissionPolicies enabled: a request without a bearer token the
server issued is 401, one the RBAC objects do not allow is 403 (worded like the RBAC authorizer),
and a Node write or Pod delete a policy denies is 403 (worded like the admission plugin). Members of
`system:masters` pass authorization, as they do on a real server. Needs cel-python (admission).
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
from collections.abc import Iterable
from typing import Any

from migagent_sim.apiserver.admission import AdmissionChain, AdmissionRequest
from migagent_sim.apiserver.dispatch import ApiRequest
from migagent_sim.apiserver.errors import ApiError
from migagent_sim.apiserver.rbac import Attributes, RbacAuthorizer, UserInfo
from migagent_sim.apiserver.routing import rbac_verb

JsonDict = dict[str, Any]
MASTERS = "system:masters"
ADMIN = UserInfo("kubernetes-admin", (MASTERS, "system:authenticated"))


class AccessControl:
    def __init__(self, objects: Iterable[JsonDict]) -> None:
        """`objects`: rendered manifests; their RBAC objects and admission policies/bindings are enforced."""
        objects = list(objects)
        self._rbac = RbacAuthorizer(objects)
        self._admission = AdmissionChain(objects, self.allowed)
        self._lock = threading.Lock()
        self._tokens: dict[str, UserInfo] = {}

    def issue_token(self, user: UserInfo) -> str:
        """A bearer token that authenticates as `user` (a projected service-account token, say)."""
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._tokens[token] = user
        return token

    def authenticate(self, authorization: str | None) -> UserInfo:
        """The user of an `Authorization: Bearer <token>` header; 401 without a token this server issued."""
        scheme, _, token = (authorization or "").partition(" ")
        with self._lock:
            user = self._tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise ApiError(401, "Unauthorized")
        return user

    def allowed(self, user: UserInfo, attributes: Attributes) -> bool:
        return MASTERS in user.groups or self._rbac.allowed(user, attributes)

    def authorize(self, user: UserInfo, attributes: Attributes) -> None:
        if not self.allowed(user, attributes):
            raise attributes.forbidden(user)

    def check_request(self, request: ApiRequest, authorization: str | None) -> ApiRequest:
        """Authenticate and authorize one request (401/403 as ApiError); returns it with its user."""
        user = self.authenticate(authorization)
        route = request.route
        attributes = Attributes(
            verb=rbac_verb(request.method, route, request.query),
            group=route.group,
            resource=route.plural,
            subresource=route.subresource or "",
            namespace=route.namespace or "",
            name=route.name or "",
        )
        self.authorize(user, attributes)
        return dataclasses.replace(request, user=user)

    def admit_node(self, request: ApiRequest, old: JsonDict, new: JsonDict) -> None:
        """Validating admission of a Node write (PATCH and PUT are both UPDATE) by the request's user."""
        if request.user is None:
            raise ApiError(401, "Unauthorized")
        route = request.route
        self.admit(
            AdmissionRequest(
                operation="UPDATE",
                group=route.group,
                version=route.version,
                resource=route.plural,
                subresource=route.subresource or "",
                namespace="",
                name=route.name or "",
                user=request.user,
                object=new,
                old_object=old,
            )
        )

    def admit_pod_delete(self, request: ApiRequest, pod: JsonDict) -> None:
        """Validating admission of a Pod DELETE: `oldObject` is the stored pod, `object` is null."""
        if request.user is None:
            raise ApiError(401, "Unauthorized")
        route = request.route
        self.admit(
            AdmissionRequest(
                operation="DELETE",
                group=route.group,
                version=route.version,
                resource=route.plural,
                subresource="",
                namespace=route.namespace or "",
                name=route.name or "",
                user=request.user,
                object=None,
                old_object=pod,
            )
        )

    def admit(self, request: AdmissionRequest) -> None:
        self._admission.admit(request)

    def decisions(self) -> list[tuple[UserInfo, Attributes, bool]]:
        """Every RBAC question asked so far (requests, and admission's authorizer checks) with its answer."""
        return self._rbac.decisions()
