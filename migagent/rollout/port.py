"""What a rollout driver needs from the cluster (its port; kube.rollout_api.RolloutApi in production),
what it tells whoever watches (its listener), and the creation of a rollout's state object.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from migagent.node.port import NodeView, PodView
from migagent.rollout.budget import DisruptionBudget
from migagent.rollout.codec import StoredObject, decode, encode
from migagent.rollout.errors import AlreadyStartedError
from migagent.rollout.state import RolloutState


class RolloutPort(Protocol):
    """What a driver needs from the cluster (kube.rollout_api.RolloutApi)."""

    def list_nodes(self, selector: str) -> list[NodeView]: ...

    def set_layout(self, node: NodeView, layout: str | None) -> NodeView:
        """Only while the Node is as read (its resourceVersion): NodeChangedError (transient) otherwise."""
        ...

    def warn_node(self, node: NodeView, reason: str, message: str) -> None:
        """A Warning Event on the Node (best effort: the state and the report say it too)."""
        ...

    def list_pods_on_node(self, node: str) -> list[PodView]: ...

    def list_pdbs(self) -> Sequence[DisruptionBudget]: ...

    def read_state(self, rollout: str) -> StoredObject | None: ...

    def create_state(self, rollout: str, data: Mapping[str, str]) -> str | None:
        """Its resourceVersion; None when an object of that name exists already."""
        ...

    def replace_state(self, rollout: str, data: Mapping[str, str], resource_version: str) -> str: ...


class RolloutListener(Protocol):
    """Progress: one call per decision (`event`), and the whole picture after each look (`progress`)."""

    def event(self, event: str, **fields: object) -> None: ...

    def progress(self, state: RolloutState, live: Mapping[str, LiveNode]) -> None: ...


@dataclass(frozen=True)
class LiveNode:
    """A node in flight as the driver last saw it."""

    agent: str
    """The agent's MigConfigReady reason (Reconfiguring, Draining, ...)."""
    evicted: tuple[str, ...]
    seconds: float


def new_holder() -> str:
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


def gpu_pods(pods: Sequence[PodView]) -> tuple[str, ...]:
    """The node's running pods that hold GPUs and a drain may evict (`namespace/name`)."""
    return tuple(
        sorted(
            str(p.ref) for p in pods
            if p.gpu_resources and not p.is_finished and not p.is_daemonset_pod and not p.is_mirror
        )
    )


def create(port: RolloutPort, state: RolloutState, *, holder: str | None, now: float) -> RolloutState:
    """Create the state object, held by `holder` (the driver about to drive it; None: a controller will).
    Of two starts that both found no object, one creates it; the other learns who did."""
    held = replace(state, holder=holder, holder_expires=now + state.spec.lease_s if holder else 0.0)
    version = port.create_state(state.name, encode(held))
    if version is not None:
        return replace(held, resource_version=version)
    stored = port.read_state(state.name)
    winner = decode(state.name, stored) if stored is not None else None
    if winner is not None and winner.holder:
        raise AlreadyStartedError(
            f"rollout {state.name}: another driver has just started it and drives it: {winner.holder}"
            f" (follow it with `migagent rollout status {state.name}`)"
        )
    raise AlreadyStartedError(
        f"rollout {state.name}: another `migagent rollout start --detach` has just created it; a `migagent"
        f" rollout controller` drives it (follow it with `migagent rollout status {state.name}`)"
    )
