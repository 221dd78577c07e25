"""A simulated pool, and `migagent rollout` driven against it through the real client over HTTP."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from migagent.clock import SystemClock
from migagent.kube.rollout_api import RolloutApi
from migagent.node.names import MIG_CONFIG_STATE_LABEL, OBSERVED_ANNOTATION
from migagent.rollout.budget import MaxUnavailable
from migagent.rollout.codec import encode
from migagent.rollout.driver import RolloutDriver
from migagent.rollout.port import LiveNode
from migagent.rollout.scope import initial_state, one_layout
from migagent.rollout.spec import RolloutSpec
from migagent.rollout.state import Layouts, RolloutState
from migagent_sim.apiserver.rbac import UserInfo
from migagent_sim.deadline import Deadline
from migagent_sim.pool import SimPool

CLOCK = SystemClock()
TARGET = "all-balanced"
DRIVE_LIMIT_S = 300.0
"""A bound, not a measure: a loaded machine makes a rollout of a few nodes take minutes (pytest-timeout
is the backstop)."""


@dataclass
class Recorder:
    """The driver's listener: every event, in order."""

    events: list[tuple[str, dict[str, object]]] = field(default_factory=list)

    def event(self, event: str, **fields: object) -> None:
        self.events.append((event, fields))

    def progress(self, state: RolloutState, live: Mapping[str, LiveNode]) -> None:
        return None

    def named(self, event: str) -> list[dict[str, object]]:
        return [fields for name, fields in self.events if name == event]

    def waves(self) -> list[list[str]]:
        """The nodes of each wave started, in order."""
        return [[str(node) for node in nodes] for fields in self.named("wave_started")
                if isinstance(nodes := fields["nodes"], list)]


def api(pool: SimPool, user: UserInfo | None = None) -> RolloutApi:
    return RolloutApi(pool.client(user), clock=CLOCK)


def reported_pods(pool: SimPool, node: str) -> set[str]:
    text = pool.node(node)["metadata"].get("annotations", {}).get(OBSERVED_ANNOTATION, "[]")
    return {pod for gpu in json.loads(text) for gi in gpu["gpu_instances"] for pod in gi.get("pods", [])}


def wait_reported(pool: SimPool, pods: Iterable[tuple[str, str]] = (), timeout_s: float = 30.0) -> None:
    """Until every agent reports success and the given (node, `ml/pod`) in its pods per GI."""
    wanted = set(pods)
    deadline = Deadline(timeout_s)
    while not deadline.passed():
        states = {pool.labels(name).get(MIG_CONFIG_STATE_LABEL) for name in pool.nodes}
        seen = {(name, pod) for name in pool.nodes for pod in reported_pods(pool, name)}
        if states == {"success"} and wanted <= seen:
            return
        CLOCK.sleep(0.05)
    raise AssertionError(f"the agents did not report {sorted(wanted)} in time (states {states})")


def create(pool: SimPool, name: str, spec: RolloutSpec, user: UserInfo | None = None) -> RolloutState:
    rollout_api = api(pool, user)
    layouts = Layouts.parse(rollout_api.read_layouts(), source="the pool's layouts")
    nodes = rollout_api.list_nodes(spec.selector)
    state = initial_state(name, spec, layouts, nodes, one_layout(nodes, spec.layout))
    assert rollout_api.create_state(name, encode(state)) is not None
    return state


def drive(pool: SimPool, name: str, recorder: Recorder | None = None, user: UserInfo | None = None) -> RolloutState:
    """Drive to the end (done, halted, or paused with nothing in flight); fails the test past the limit."""
    stop = threading.Event()
    timer = threading.Timer(DRIVE_LIMIT_S, stop.set)
    timer.start()
    try:
        driver = RolloutDriver(api(pool, user), name, clock=CLOCK, listener=recorder or Recorder(), poll_s=0.05,
                               stop=stop)
        final = driver.run()
    finally:
        timer.cancel()
    assert not stop.is_set(), f"rollout {name} did not end within {DRIVE_LIMIT_S}s: {final.dumps()}"
    return final


def spec(pool: SimPool, **overrides: object) -> RolloutSpec:
    values: dict[str, object] = {"selector": pool.selector, "layout": TARGET, "max_unavailable": "4", "lease_s": 5.0}
    values.update(overrides)
    values["max_unavailable"] = MaxUnavailable.parse(str(values["max_unavailable"]))
    return RolloutSpec(**values)  # type: ignore[arg-type]


def holdings(pool: SimPool, node: str) -> list[tuple[int, list[tuple[str, str]]]]:
    """Each GPU's GIs (placement, profile) as the agent reports them: the layout, without pods or uuids."""
    text = pool.node(node)["metadata"].get("annotations", {}).get(OBSERVED_ANNOTATION, "[]")
    return [
        (gpu["index"], sorted((gi["placement"], gi.get("profile", "")) for gi in gpu["gpu_instances"]))
        for gpu in json.loads(text)
    ]
