"""The agent's identity as the fake API server authenticates it, from the rendered manifests."""

from __future__ import annotations

from migagent_sim.apiserver.rbac import UserInfo
from tests.integration.deploy.manifests import Obj, only


def agent_identity(objects: list[Obj], node_name: str) -> UserInfo:
    """The rendered ServiceAccount's identity, as its pod-bound token on `node_name` authenticates."""
    metadata = only(objects, "ServiceAccount")["metadata"]
    return UserInfo.service_account(metadata["namespace"], metadata["name"], node_name=node_name)
