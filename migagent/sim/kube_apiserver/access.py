"""Authentication, authorization and validating admission for the fake API server, in the request path.

Off by default (every request is served, as before). With an `AccessControl`, the server answers as a
real one with RBAC and ValidatingAdmissionPolicies enabled: a request without a bearer token the
server issued is 401, one the RBAC objects do not allow is 403 (worded like the RBAC authorizer),
and a Node write a policy denies is 403 (worded like the admission plugin). Members of
`system:masters` pass authorization, as they do on a real server. Needs cel-python (admission).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from migagent.sim.kube_apiserver.admission import AdmissionChain, AdmissionRequest
from migagent.sim.kube_apiserver.errors import ApiError
from migagent.sim.kube_apiserver.rbac import Attributes, RbacAuthorizer, UserInfo

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

    def authenticate(self, headers: Mapping[str, str]) -> UserInfo:
        scheme, _, token = (headers.get("Authorization") or "").partition(" ")
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

    def admit(self, request: AdmissionRequest) -> None:
        self._admission.admit(request)

    def decisions(self) -> list[tuple[UserInfo, Attributes, bool]]:
        """Every RBAC question asked so far (requests, and admission's authorizer checks) with its answer."""
        return self._rbac.decisions()
