"""An in-memory cluster behind the rollout's port (no HTTP, no threads): nodes whose agents answer a
relabel on the next look (success, or failed where told), Node resourceVersions that refuse a stale
conditional relabel as the API server does, someone else who may relabel a node, and the one in-memory
fake of the state objects (migagent_sim.doubles.state_objects) with writes that get lost or a driver
that dies on its way."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from migagent.kube.rollout_api import StoredState, state_object_name
from migagent.node.names import (
    ATTEMPT_ANNOTATION,
    CONDITION_TYPE,
    DESIRED_ANNOTATION,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    OBSERVED_ANNOTATION,
)
from migagent.node.port import NodeChangedError, NodeCondition, NodeView, PodView
from migagent.rollout.budget import DisruptionBudget, MaxUnavailable
from migagent.rollout.codec import encode
from migagent.rollout.scope import initial_state, one_layout
from migagent.rollout.spec import RolloutSpec
from migagent.rollout.state import Layouts, RolloutState
from migagent_sim.doubles.layouts import ALL_1G_AND_BALANCED
from migagent_sim.doubles.state_objects import StateObjects
from tests.unit.rollout.support import report

LAYOUT_TEXT = ALL_1G_AND_BALANCED
LAYOUTS = Layouts.parse(LAYOUT_TEXT, source="test layouts")


class Killed(BaseException):
    """The driver process dies here."""


def stored(data: Mapping[str, str], resource_version: str) -> StoredState:
    """Rollout r's state object as read at `resource_version`."""
    return StoredState("migagent-rollouts", state_object_name("r"), data, resource_version)


class Cluster(StateObjects):
    def __init__(self, names: Sequence[str]) -> None:
        super().__init__()
        self._node_version = 0
        self.nodes = {name: self._node(name, "all-1g.10gb", attempt=0) for name in names}
        self.failing: set[str] = set()
        self.relabels: Counter[str] = Counter()
        self.events: list[tuple[str, str, str]] = []
        self.lose_writes = 0
        self.kill_after_relabels: int | None = None
        self.dead = False
        self._looks = 0

    @property
    def state(self) -> StoredState | None:
        """Rollout r's state object as stored (edit its `data` to stand for a hand edit)."""
        return self.read_object("rollout/r")

    def _node(self, name: str, layout: str | None, *, attempt: int, failed: bool = False,
              labels: Mapping[str, str] | None = None) -> NodeView:
        self._node_version += 1
        desired = layout if layout is not None else "all-1g.10gb"
        kept = {k: v for k, v in (labels or {}).items() if k not in (MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL)}
        return NodeView(
            name=name, uid=name, resource_version=str(self._node_version),
            labels={**kept, **({} if layout is None else {MIG_CONFIG_LABEL: layout}),
                    MIG_CONFIG_STATE_LABEL: "failed" if failed else "success"},
            annotations={OBSERVED_ANNOTATION: report(desired), DESIRED_ANNOTATION: json.dumps({"layout": layout}),
                         ATTEMPT_ANNOTATION: str(attempt)},
            conditions=(NodeCondition(CONDITION_TYPE, "False" if failed else "True", "ApplyFailed" if failed
                                      else "Applied", "boom" if failed else ""),),
        )

    def agents_look(self, *, retry_failed: bool = False) -> None:
        """Each agent answers a new label with an attempt; a failed one retries at every other look (its
        back-off), or when told."""
        self._looks += 1
        retry_failed = retry_failed or self._looks % 2 == 0
        for name, node in self.nodes.items():
            label = node.labels.get(MIG_CONFIG_LABEL)
            marker = json.loads(node.annotations[ATTEMPT_ANNOTATION])  # JSON while an attempt runs, else a count
            attempt = int(marker["attempt"] if isinstance(marker, dict) else marker)
            settled = json.loads(node.annotations[DESIRED_ANNOTATION])["layout"] == label
            failed = node.labels[MIG_CONFIG_STATE_LABEL] == "failed"
            if not settled or (failed and (retry_failed or name not in self.failing)):
                self.nodes[name] = self._node(name, label, attempt=attempt + 1, failed=name in self.failing,
                                              labels=node.labels)

    def someone_sets(self, node: str, layout: str) -> None:
        """An admin's `kubectl label node NODE nvidia.com/mig.config=LAYOUT --overwrite`."""
        self._node_version += 1
        current = self.nodes[node]
        self.nodes[node] = replace(current, labels={**current.labels, MIG_CONFIG_LABEL: layout},
                                   resource_version=str(self._node_version))

    def label(self, node: str) -> str | None:
        return self.nodes[node].labels.get(MIG_CONFIG_LABEL)

    # --- the port ---------------------------------------------------------------------------------

    def list_nodes(self, selector: str) -> list[NodeView]:
        listed = list(self.nodes.values())
        self.agents_look()  # by the next look, the agents have answered
        return listed

    def set_layout(self, node: NodeView, layout: str | None) -> NodeView:
        if self.kill_after_relabels is not None and sum(self.relabels.values()) >= self.kill_after_relabels:
            self.kill_after_relabels = None
            self.dead = True
            raise Killed
        current = self.nodes[node.name]
        if current.resource_version != node.resource_version:
            raise NodeChangedError(f"node {node.name} changed since it was read")
        self.relabels[node.name] += 1
        self._node_version += 1
        labels = {k: v for k, v in current.labels.items() if k != MIG_CONFIG_LABEL}
        if layout is not None:
            labels[MIG_CONFIG_LABEL] = layout
        self.nodes[node.name] = replace(current, labels=labels, resource_version=str(self._node_version))
        return self.nodes[node.name]

    def warn_node(self, node: NodeView, reason: str, message: str) -> None:
        self.events.append((node.name, reason, message))

    def list_pods_on_node(self, node: str) -> list[PodView]:
        return []

    def list_pdbs(self) -> Sequence[DisruptionBudget]:
        return []

    def read_state(self, rollout: str) -> StoredState | None:
        if self.dead:  # the killed process makes no more calls (its `finally` never runs)
            self.dead = False
            raise Killed
        return super().read_state(rollout)

    def replace_state(self, rollout: str, data: Mapping[str, str], resource_version: str) -> str:
        current = self.read_object(f"rollout/{rollout}")
        if self.lose_writes and current is not None:
            self.lose_writes -= 1  # someone else wrote in between
            super().replace_state(rollout, current.data, current.resource_version)
        return super().replace_state(rollout, data, resource_version)


class Quiet:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, object]]] = []

    def event(self, event: str, **fields: object) -> None:
        self.events.append((event, fields))

    def progress(self, state: RolloutState, live: Mapping[str, object]) -> None:
        return None


def first_state(cluster: Cluster, **spec: object) -> RolloutState:
    values: dict[str, object] = {"selector": "pool=a", "layout": "all-balanced", "max_unavailable": MaxUnavailable(4),
                                 "lease_s": 10.0}
    values.update(spec)
    nodes = list(cluster.nodes.values())
    return initial_state("r", RolloutSpec(**values), LAYOUTS, nodes, one_layout(nodes, "all-balanced"))  # type: ignore[arg-type]


def started(cluster: Cluster, **spec: object) -> None:
    cluster.create_state("r", encode(first_state(cluster, **spec)))
