"""The API server's side of the state objects (ConfigMaps) the rollout and the autopilot keep, in memory:
the one fake of that half of their ports (kube.rollout_api.RolloutApi, kube.demand_api), for the model
pool and the rollout's unit tests alike. A create of a name that exists returns None; a replace at a
resourceVersion the object no longer has is refused as the API server refuses it (409, the real port's
StateConflictError), and nothing is written; every write is a new resourceVersion."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from migagent.kube.rollout_api import StateConflictError, StoredState, state_object_name


class StateObjects:
    def __init__(self, namespace: str = "migagent-rollouts") -> None:
        self.objects: dict[str, StoredState] = {}
        self._namespace = namespace
        self._versions = itertools.count(1)

    def read_object(self, key: str) -> StoredState | None:
        return self.objects.get(key)

    def write_object(self, key: str, name: str, data: Mapping[str, str], resource_version: str | None) -> str:
        """Create (`resource_version` None: refused when it exists) or replace at `resource_version`."""
        current = self.objects.get(key)
        if resource_version is None and current is not None:
            raise StateConflictError(f"{key} exists already")
        if resource_version is not None and (current is None or current.resource_version != resource_version):
            raise StateConflictError(f"{key} changed since it was read")
        version = str(next(self._versions))
        self.objects[key] = StoredState(self._namespace, name, data, version)
        return version

    def read_state(self, rollout: str) -> StoredState | None:
        return self.read_object(f"rollout/{rollout}")

    def list_states(self) -> list[StoredState]:
        return [state for key, state in sorted(self.objects.items()) if key.startswith("rollout/")]

    def create_state(self, rollout: str, data: Mapping[str, str]) -> str | None:
        if self.read_state(rollout) is not None:
            return None
        return self.write_object(f"rollout/{rollout}", state_object_name(rollout), data, None)

    def replace_state(self, rollout: str, data: Mapping[str, str], resource_version: str) -> str:
        return self.write_object(f"rollout/{rollout}", state_object_name(rollout), data, resource_version)
