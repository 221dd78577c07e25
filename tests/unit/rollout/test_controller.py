"""The rollout controller over an in-memory cluster: a state object it cannot read is said once and
left alone (nothing relabelled, the controller runs on); once repaired, it is driven."""

from __future__ import annotations

import json
import threading

from migagent.clock import FakeClock
from migagent.rollout.controller import run_controller
from migagent.rollout.state import Phase
from tests.unit.rollout.cluster import Cluster, Quiet, started


class LooksThenStops(FakeClock):
    """Sets `stop` after `looks` waits: the controller's loop runs that many times."""

    def __init__(self, stop: threading.Event, looks: int) -> None:
        super().__init__()
        self._stop = stop
        self._left = looks

    def wait(self, event: threading.Event, timeout: float) -> bool:
        self._left -= 1
        if self._left <= 0:
            self._stop.set()
        return super().wait(event, timeout)


def run(cluster: Cluster, listener: Quiet, looks: int) -> None:
    stop = threading.Event()
    run_controller(cluster, clock=LooksThenStops(stop, looks), listener=listener, poll_s=1.0, stop=stop)


def test_an_unreadable_state_is_said_once_left_alone_and_driven_once_repaired() -> None:
    cluster = Cluster(["a", "b"])
    started(cluster)
    assert cluster.state is not None
    sound = cluster.state.data
    cluster.state.data = {**sound, "state": "{truncated"}
    listener = Quiet()
    run(cluster, listener, looks=5)
    said = [fields for name, fields in listener.events if name == "controller_state_unreadable"]
    assert len(said) == 1
    assert "configmap migagent-rollouts/migagent-rollout-r" in str(said[0]["error"])
    assert cluster.relabels == {}

    cluster.state.data = sound  # repaired (kubectl edit)
    run(cluster, listener, looks=20)
    assert json.loads(cluster.state.data["state"])["phase"] == Phase.DONE
    assert cluster.relabels == {"a": 1, "b": 1}
