"""`migagent rollout controller`: every running rollout driven from inside the cluster, one step each per
look, under the controller's own lease, until stopped.

A rollout another driver holds (a person's `rollout start`, another replica) is left to it; one whose
driver died is taken over when that lease expires. A state object that cannot be read is said once
(per version of it) and left alone: nothing is relabelled on its account, and the others run on.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from migagent.clock import Clock
from migagent.errors import TransientError
from migagent.rollout.codec import StoredObject, decode
from migagent.rollout.driver import RolloutDriver
from migagent.rollout.errors import CorruptStateError, HeldElsewhereError, RolloutError
from migagent.rollout.port import RolloutListener, RolloutPort, new_holder
from migagent.rollout.state import NodeStatus, Phase, RolloutState


class StatePort(RolloutPort, Protocol):
    """A port that can also list every rollout's state object."""

    def list_states(self) -> Sequence[StoredObject]: ...


class _Unreadable:
    """The state objects that could not be read, each said once per resourceVersion."""

    def __init__(self, listener: RolloutListener) -> None:
        self._listener = listener
        self._said: dict[str, str] = {}

    def say(self, name: str, version: str, error: CorruptStateError) -> None:
        if self._said.get(name) != version:
            self._said[name] = version
            self._listener.event("controller_state_unreadable", rollout=name, error=str(error))


def run_controller(
    api: StatePort, *, clock: Clock, listener: RolloutListener, poll_s: float, stop: threading.Event
) -> None:
    holder = new_holder()
    drivers: dict[str, RolloutDriver] = {}
    unreadable = _Unreadable(listener)
    read: dict[str, RolloutState] = {}  # each rollout as last read: its spec and layouts parsed once
    while not stop.is_set():
        try:
            stored_states = api.list_states()
        except TransientError as error:
            listener.event("controller_list_failed", error=str(error))
            clock.wait(stop, poll_s)
            continue
        for stored in stored_states:
            name = stored.rollout
            try:
                state = read[name] = decode(name, stored, read.get(name))
            except CorruptStateError as error:
                unreadable.say(name, stored.resource_version, error)
                continue
            if state.phase is Phase.DONE or state.held_by_other(holder, clock.wall()):
                continue
            if state.phase in (Phase.PAUSED, Phase.HALTED) and not state.in_status(NodeStatus.IN_FLIGHT):
                continue
            driver = drivers.setdefault(name, RolloutDriver(api, name, clock=clock, listener=listener, holder=holder))
            try:
                after = driver.step()
                if after.phase is Phase.DONE or (
                    after.phase is Phase.HALTED and not after.in_status(NodeStatus.IN_FLIGHT)
                ):
                    driver.release()
            except CorruptStateError as error:  # changed between the list and the step
                unreadable.say(name, stored.resource_version, error)
            except (TransientError, HeldElsewhereError) as error:
                listener.event("controller_step_retried", rollout=name, error=str(error))
        clock.wait(stop, poll_s)
    for driver in drivers.values():  # stopped (SIGTERM): hand the rollouts over now, not at lease expiry
        try:
            driver.release()
        except (TransientError, RolloutError) as error:
            listener.event("controller_release_failed", error=str(error))
