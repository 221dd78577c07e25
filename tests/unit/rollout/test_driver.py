"""The driver against an in-memory cluster (no HTTP, no threads, a fake clock): relabel once across
lost writes and a killed driver, the lease, and a resume that forgives only the old failure."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pytest

from migagent.clock import FakeClock
from migagent.errors import TransientError
from migagent.node.names import (
    ATTEMPT_ANNOTATION,
    CONDITION_TYPE,
    DESIRED_ANNOTATION,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    OBSERVED_ANNOTATION,
)
from migagent.node.port import NodeCondition, NodeView, PodView
from migagent.rollout.budget import DisruptionBudget
from migagent.rollout.driver import HeldElsewhereError, RolloutDriver, encode, initial_state, resumed
from migagent.rollout.state import NodeStatus, Phase, RolloutSpec, RolloutState
from migagent_sim.doubles.layouts import ALL_1G_AND_BALANCED
from tests.unit.rollout.support import LAYOUTS, report

LAYOUT_TEXT = ALL_1G_AND_BALANCED


class Killed(BaseException):
    """The driver process dies here."""


@dataclass
class Stored:
    data: Mapping[str, str]
    resource_version: str


class Cluster:
    """Nodes whose agents answer a relabel on the next look (success, or failed where told), and one
    state object with resourceVersions."""

    def __init__(self, names: Sequence[str]) -> None:
        self.nodes = {name: self._node(name, "all-1g.10gb", attempt=0) for name in names}
        self.failing: set[str] = set()
        self.relabels: Counter[str] = Counter()
        self.lose_writes = 0
        self.kill_after_relabels: int | None = None
        self.dead = False
        self.state: Stored | None = None
        self._version = 0

    @staticmethod
    def _node(name: str, layout: str, *, attempt: int, failed: bool = False) -> NodeView:
        return NodeView(
            name=name, uid=name, resource_version="1",
            labels={MIG_CONFIG_LABEL: layout, MIG_CONFIG_STATE_LABEL: "failed" if failed else "success"},
            annotations={OBSERVED_ANNOTATION: report(layout), DESIRED_ANNOTATION: json.dumps({"layout": layout}),
                         ATTEMPT_ANNOTATION: str(attempt)},
            conditions=(NodeCondition(CONDITION_TYPE, "False" if failed else "True", "ApplyFailed" if failed
                                      else "Applied", "boom" if failed else ""),),
        )

    def agents_look(self) -> None:
        for name, node in self.nodes.items():
            label = node.labels[MIG_CONFIG_LABEL]
            attempt = int(node.annotations[ATTEMPT_ANNOTATION])
            settled = json.loads(node.annotations[DESIRED_ANNOTATION])["layout"] == label
            if name in self.failing:
                self.nodes[name] = self._node(name, label, attempt=attempt + 1, failed=True)
            elif not settled or node.labels[MIG_CONFIG_STATE_LABEL] == "failed":
                self.nodes[name] = self._node(name, label, attempt=attempt + 1)

    # --- the port ---------------------------------------------------------------------------------

    def list_nodes(self, selector: str) -> list[NodeView]:
        listed = list(self.nodes.values())
        self.agents_look()  # by the next look, the agents have answered
        return listed

    def set_layout(self, node: str, layout: str | None) -> NodeView:
        if self.kill_after_relabels is not None and sum(self.relabels.values()) >= self.kill_after_relabels:
            self.kill_after_relabels = None
            self.dead = True
            raise Killed
        self.relabels[node] += 1
        current = self.nodes[node]
        self.nodes[node] = replace(current, labels={**current.labels, MIG_CONFIG_LABEL: str(layout)})
        return self.nodes[node]

    def list_pods_on_node(self, node: str) -> list[PodView]:
        return []

    def list_pdbs(self) -> Sequence[DisruptionBudget]:
        return []

    def read_state(self, rollout: str) -> Stored | None:
        if self.dead:  # the killed process makes no more calls (its `finally` never runs)
            self.dead = False
            raise Killed
        return self.state

    def create_state(self, rollout: str, data: Mapping[str, str]) -> str:
        self._version += 1
        self.state = Stored(dict(data), str(self._version))
        return self.state.resource_version

    def replace_state(self, rollout: str, data: Mapping[str, str], resource_version: str) -> str:
        assert self.state is not None
        if self.lose_writes:
            self.lose_writes -= 1
            self._version += 1  # someone else wrote in between
            self.state = Stored(self.state.data, str(self._version))
        if resource_version != self.state.resource_version:
            raise TransientError("conflict", delay=0.0)
        self._version += 1
        self.state = Stored(dict(data), str(self._version))
        return self.state.resource_version


class Quiet:
    def event(self, event: str, **fields: object) -> None:
        return None

    def progress(self, state: RolloutState, live: Mapping[str, object]) -> None:
        return None


def started(cluster: Cluster, **spec: object) -> None:
    values: dict[str, object] = {"selector": "pool=a", "layout": "all-balanced", "max_unavailable": "4",
                                 "lease_s": 10.0}
    values.update(spec)
    state = initial_state("r", RolloutSpec(**values), LAYOUT_TEXT, list(cluster.nodes.values()))  # type: ignore[arg-type]
    cluster.create_state("r", encode(state))


def driver(cluster: Cluster, clock: FakeClock, holder: str = "one") -> RolloutDriver:
    return RolloutDriver(cluster, "r", clock=clock, listener=Quiet(), holder=holder, poll_s=1.0)


def test_lost_state_writes_are_read_again_and_each_node_is_still_relabelled_once() -> None:
    cluster = Cluster(["a", "b", "c", "d"])
    started(cluster)
    cluster.lose_writes = 5
    final = driver(cluster, FakeClock()).run()
    assert final.phase is Phase.DONE
    assert cluster.relabels == dict.fromkeys("abcd", 1)
    assert LAYOUTS.names  # the layouts the reports were built from


def test_a_driver_killed_between_the_wave_and_its_labels_is_resumed_by_the_next_after_its_lease() -> None:
    cluster = Cluster(["a", "b", "c", "d", "e"])
    started(cluster)
    clock = FakeClock()
    cluster.kill_after_relabels = 2  # the canary and one node of wave 2 relabelled, then the process dies
    with pytest.raises(Killed):
        driver(cluster, clock, "one").run()
    with pytest.raises(HeldElsewhereError, match="is driven by one"):
        driver(cluster, clock, "two").step()
    clock.advance(10.0)
    final = driver(cluster, clock, "two").run()
    assert final.phase is Phase.DONE
    assert cluster.relabels == dict.fromkeys("abcde", 1)
    assert final.holder is None or final.holder == "two"


def test_a_resume_forgives_the_failure_it_saw_and_halts_again_only_on_a_new_one() -> None:
    cluster = Cluster(["a", "b", "c"])
    started(cluster, max_unavailable="2")
    cluster.failing.add("b")
    clock = FakeClock()
    halted = driver(cluster, clock).run()
    assert halted.phase is Phase.HALTED
    assert [r.node for r in halted.in_status(NodeStatus.FAILED)] == ["b"]

    # b's agent retried (and failed) while the rollout was halted; then the fault is cleared and the
    # rollout resumed while b still shows that later failed attempt: forgiven, not a new failure.
    cluster.agents_look()
    cluster.failing.discard("b")
    assert cluster.state is not None
    state = RolloutState.loads(cluster.state.data["state"], layouts=LAYOUT_TEXT,
                               resource_version=cluster.state.resource_version)
    cluster.replace_state("r", encode(resumed(state)), state.resource_version)
    final = driver(cluster, clock).run()
    assert final.phase is Phase.DONE
    assert cluster.relabels == dict.fromkeys("abc", 1)


def test_a_fault_not_cleared_halts_the_resumed_rollout_again_on_the_next_failed_attempt() -> None:
    cluster = Cluster(["a", "b", "c"])
    started(cluster, max_unavailable="2")
    cluster.failing.add("b")
    clock = FakeClock()
    assert driver(cluster, clock).run().phase is Phase.HALTED
    assert cluster.state is not None
    state = RolloutState.loads(cluster.state.data["state"], layouts=LAYOUT_TEXT,
                               resource_version=cluster.state.resource_version)
    cluster.replace_state("r", encode(resumed(state)), state.resource_version)
    again = driver(cluster, clock).run()
    assert again.phase is Phase.HALTED
    assert [r.node for r in again.in_status(NodeStatus.PENDING)] == ["c"]


def test_a_failed_canary_halts_whatever_the_failure_budget() -> None:
    cluster = Cluster(["a", "b", "c"])
    started(cluster, failure_budget=5)
    cluster.failing.add("a")  # the canary (fewest evictions, then by name)
    halted = driver(cluster, FakeClock()).run()
    assert halted.phase is Phase.HALTED
    assert [r.node for r in halted.in_status(NodeStatus.FAILED)] == ["a"]
    assert cluster.relabels == {"a": 1}
