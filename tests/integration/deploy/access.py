"""The rendered manifests as the fake API server enforces them: RBAC, the admission chain, the agent's identity."""

from __future__ import annotations

from migagent.sim.kube_apiserver.access import AccessControl
from migagent.sim.kube_apiserver.rbac import UserInfo
from tests.integration.deploy.manifests import Obj, only


def agent_identity(objects: list[Obj], node_name: str) -> UserInfo:
    """The rendered ServiceAccount's identity, as its pod-bound token on `node_name` authenticates."""
    metadata = only(objects, "ServiceAccount")["metadata"]
    return UserInfo.service_account(metadata["namespace"], metadata["name"], node_name=node_name)


def enforced(objects: list[Obj]) -> AccessControl:
    """Authentication off (no tokens yet), RBAC and admission from the rendered objects."""
    return AccessControl(objects)
