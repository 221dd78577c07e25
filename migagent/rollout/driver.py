"""The loop that drives one rollout, through a port to the cluster and a clock: it reads the state
object, follows the nodes in flight, starts the next wave when the last one is done, and writes
every decision back with a conditional write before acting on it.

    read state (take or renew the lease) -> read the pool -> nodes in flight: success? failed?
    -> failures >= --failure-budget, or a failed canary: halt, with each node's reason
    -> nothing in flight, canary soaked: choose the least disturbing wave within --max-unavailable
       and every PDB -> write it (nodes in flight, predictions) -> relabel each node once
    -> no node pending or in flight: done

A driver that is killed leaves its lease to expire; the next one resumes from the object. A node
is written "in flight" before its label changes, its label is changed only from the value the
rollout expects (a conditional write on the Node as read), and the change is recorded after: so
however often the drive is interrupted each node is relabelled once, and a label someone else set
is never overwritten (ownership.py: the node is left alone, and said to be).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace

import structlog

from migagent.clock import Clock
from migagent.errors import MigAgentError, TransientError
from migagent.node.port import NodeView, PodView
from migagent.rollout.budget import Room, choose_wave
from migagent.rollout.codec import decode, encode
from migagent.rollout.errors import HeldElsewhereError, RolloutError
from migagent.rollout.impact import NodeImpact, with_pods_now
from migagent.rollout.ownership import EVENT_REASON, changed_elsewhere, layout_label, left_alone
from migagent.rollout.port import LiveNode, RolloutListener, RolloutPort, gpu_pods, new_holder
from migagent.rollout.reports import AgentAnswer, agent_phase, answer, attempt, failure_reason
from migagent.rollout.scope import FORGIVE_CURRENT, impact_of
from migagent.rollout.state import Mode, NodeRecord, NodeStatus, Phase, RolloutState

log = structlog.get_logger(__name__)


class RolloutDriver:
    def __init__(
        self,
        port: RolloutPort,
        name: str,
        *,
        clock: Clock,
        listener: RolloutListener,
        holder: str | None = None,
        poll_s: float = 1.0,
        stop: threading.Event | None = None,
    ) -> None:
        self._port = port
        self._name = name
        self._clock = clock
        self._listener = listener
        self.holder = holder or new_holder()
        self._poll_s = poll_s
        self._stop = stop or threading.Event()
        self._last: RolloutState | None = None
        """The rollout as last read: its spec and layouts are reused while the object keeps them."""

    # --- the object ---------------------------------------------------------------------------------

    def load(self) -> RolloutState:
        stored = self._port.read_state(self._name)
        if stored is None:
            raise RolloutError(f"no rollout {self._name} (no state object); start it with `migagent rollout start`")
        self._last = decode(self._name, stored, self._last)
        return self._last

    def _write(self, state: RolloutState) -> RolloutState:
        """A conditional write (StateConflictError when someone wrote since); returns it at its new version."""
        version = self._port.replace_state(self._name, encode(state), state.resource_version)
        return replace(state, resource_version=version)

    def _claim(self, state: RolloutState) -> RolloutState:
        now = self._clock.wall()
        if state.held_by_other(self.holder, now):
            raise HeldElsewhereError(
                f"rollout {self._name} is driven by {state.holder} (its lease runs {state.holder_expires - now:.0f}s"
                " more); it can be taken over once that lease expires"
            )
        if state.holder == self.holder and state.holder_expires - now > state.spec.lease_s / 2:
            return state
        return self._write(replace(state, holder=self.holder, holder_expires=now + state.spec.lease_s))

    def release(self) -> None:
        state = self.load()
        if state.holder == self.holder:
            self._write(replace(state, holder=None, holder_expires=0.0))

    # --- the loop -----------------------------------------------------------------------------------

    def run(self) -> RolloutState:
        """Drive until done, halted, or paused with nothing in flight (or `stop`); releases the lease."""
        try:
            while not self._stop.is_set():
                try:
                    state = self.step()
                except TransientError as error:
                    # A conditional write lost to another writer (pause, resume, undo, a Node that changed
                    # since it was read), or the API server hiccupped: read again and decide again.
                    log.info("rollout_step_retried", rollout=self._name, error=str(error))
                    self._clock.wait(self._stop, self._poll_s)
                    continue
                if self._finished(state):
                    return state
                self._clock.wait(self._stop, self._poll_s)
            return self.load()
        finally:
            try:
                self.release()
            except Exception as error:  # the lease expires on its own
                log.warning("rollout_lease_not_released", rollout=self._name, error=str(error))

    @staticmethod
    def _finished(state: RolloutState) -> bool:
        """Done; or halted or paused with no node in flight (those in flight are followed to their end)."""
        if state.phase is Phase.DONE:
            return True
        return state.phase in (Phase.PAUSED, Phase.HALTED) and not state.in_status(NodeStatus.IN_FLIGHT)

    def step(self) -> RolloutState:
        """One look and the decisions it leads to."""
        state = self._claim(self.load())
        nodes = {node.name: node for node in self._port.list_nodes(state.spec.selector)}
        state = self._leave_changed_nodes(state, nodes)
        state = self._follow(state, nodes)
        if state.phase in (Phase.RUNNING, Phase.HALTED):
            state = self._maybe_halt(state)
        if state.phase is Phase.RUNNING and not state.in_status(NodeStatus.IN_FLIGHT):
            state = self._next_wave(state, nodes)
        return state

    def _leave_changed_nodes(self, state: RolloutState, nodes: Mapping[str, NodeView]) -> RolloutState:
        """Nodes whose label someone else changed leave the rollout, recorded and said (status, Event)."""
        now = self._clock.wall()
        left: list[tuple[NodeRecord, NodeView]] = []
        for record in state.nodes.values():
            node = nodes.get(record.node)
            if node is not None and changed_elsewhere(record, layout_label(node)):
                left.append((left_alone(record, layout_label(node), now), node))
        if not left:
            return state
        for record, _ in left:
            state = state.with_node(record)
        state = self._write(state)
        for record, node in left:
            self._listener.event("node_left_alone", rollout=self._name, node=record.node, reason=record.reason)
            try:
                self._port.warn_node(node, EVENT_REASON, f"rollout {self._name}: {record.reason}")
            except MigAgentError as error:  # the state and the report say it too
                self._listener.event("event_not_recorded", rollout=self._name, node=record.node, error=str(error))
        return state

    def _follow(self, state: RolloutState, nodes: Mapping[str, NodeView]) -> RolloutState:
        now = self._clock.wall()
        changed = False
        live: dict[str, LiveNode] = {}
        for record in state.in_status(NodeStatus.FAILED):
            node = nodes.get(record.node)
            if node is not None and answer(node, record.target) is AgentAnswer.SUCCESS:  # its agent retried
                state = state.with_node(replace(record, status=NodeStatus.DONE, finished_at=now, reason=""))
                self._listener.event("node_done", rollout=self._name, node=record.node, wave=record.wave,
                                     predicted=list(record.predicted), evicted=list(record.evicted), late=True)
                changed = True
        for listed in state.in_status(NodeStatus.IN_FLIGHT):
            record = listed
            node = nodes.get(record.node)
            if node is None:
                state = state.with_node(replace(record, status=NodeStatus.FAILED, reason="the node is gone",
                                                finished_at=now))
                changed = True
                continue
            if record.stale_attempt == FORGIVE_CURRENT:
                # Resumed: the failure showing now is the old one, and so is an attempt in flight (it may
                # have met the fault before it was cleared); only an attempt that starts later counts.
                record = replace(record, stale_attempt=attempt(node))
                changed = True
            if not record.labelled:  # a driver stopped between writing the wave and this label (or its record)
                record = self._relabel(record, node)
                changed = True
            state = state.with_node(record)
            present = set(gpu_pods(self._port.list_pods_on_node(record.node)))
            evicted = tuple(p for p in record.pods_before if p not in present)
            reply = answer(node, record.target)
            if reply is AgentAnswer.FAILED and attempt(node) == record.stale_attempt:
                reply = AgentAnswer.WORKING  # the failure a resume already forgave; the agent retries
            if reply is AgentAnswer.SUCCESS:
                state = state.with_node(replace(record, status=NodeStatus.DONE, evicted=evicted, finished_at=now))
                self._listener.event("node_done", rollout=self._name, node=record.node, wave=record.wave,
                                     predicted=list(record.predicted), evicted=list(evicted))
                changed = True
            elif reply is AgentAnswer.FAILED:
                reason = failure_reason(node)
                state = state.with_node(replace(record, status=NodeStatus.FAILED, evicted=evicted, finished_at=now,
                                                reason=reason, stale_attempt=attempt(node)))
                self._listener.event("node_failed", rollout=self._name, node=record.node, wave=record.wave,
                                     reason=reason)
                changed = True
            else:
                started = record.started_at or now
                live[record.node] = LiveNode(agent_phase(node), evicted, max(0.0, now - started))
        if changed:
            state = self._write(state)
            if state.mode is Mode.ROLLOUT and state.waves == 1 and state.canary_done_at is None and not (
                state.in_status(NodeStatus.IN_FLIGHT, NodeStatus.FAILED)
            ):
                state = self._write(replace(state, canary_done_at=now))
                self._listener.event("canary_done", rollout=self._name, soak_s=state.spec.soak_s)
        self._listener.progress(state, live)
        return state

    def _maybe_halt(self, state: RolloutState) -> RolloutState:
        failed = state.in_status(NodeStatus.FAILED)
        canary_failed = state.mode is Mode.ROLLOUT and any(r.wave == 1 for r in failed)
        if state.phase is Phase.RUNNING and not canary_failed and len(failed) < state.spec.failure_budget:
            return state
        reasons = tuple(f"{r.node}: {r.reason}" for r in failed)
        if state.phase is Phase.HALTED:  # halted already: the reasons follow nodes that fail meanwhile
            return state if set(reasons) <= set(state.reasons) else self._write(replace(state, reasons=reasons))
        return self._halt(state, reasons, failed=len(failed))

    def _halt(self, state: RolloutState, reasons: tuple[str, ...], *, failed: int) -> RolloutState:
        state = self._write(replace(state, phase=Phase.HALTED, reasons=reasons))
        self._listener.event("halted", rollout=self._name, failed=failed, failure_budget=state.spec.failure_budget,
                             reasons=list(reasons), in_flight=[r.node for r in state.in_status(NodeStatus.IN_FLIGHT)])
        return state

    def _room(self, state: RolloutState) -> Room:
        """--max-unavailable over the pool, less the failed nodes that stay out of service."""
        pool = sum(r.gpus for r in state.nodes.values() if r.status is not NodeStatus.SKIPPED)
        held = tuple(NodeImpact(node=r.node, gpus=r.gpus) for r in state.in_status(NodeStatus.FAILED))
        return Room(state.spec.max_unavailable, pool, held)

    def _candidates(
        self, state: RolloutState, nodes: Mapping[str, NodeView]
    ) -> tuple[RolloutState, list[NodeImpact], dict[str, list[PodView]]]:
        """Each pending node's predicted change now (pods as they are now); those that cannot change skipped."""
        candidates: list[NodeImpact] = []
        pods: dict[str, list[PodView]] = {}
        for record in state.in_status(NodeStatus.PENDING):
            node = nodes.get(record.node)
            if node is None:
                state = state.with_node(replace(record, status=NodeStatus.SKIPPED, reason="the node is gone"))
                continue
            if record.target is None:
                candidates.append(NodeImpact(node=record.node, gpus=record.gpus))
                continue
            impact = impact_of(node, state.layouts.file, record.target)
            if not impact.plannable:
                state = state.with_node(replace(record, status=NodeStatus.SKIPPED, reason=impact.problem))
                self._listener.event("node_skipped", rollout=self._name, node=record.node, reason=impact.problem)
                continue
            pods[record.node] = self._port.list_pods_on_node(record.node)
            candidates.append(with_pods_now(impact, gpu_pods(pods[record.node])))
        return state, candidates, pods

    def _next_wave(self, state: RolloutState, nodes: Mapping[str, NodeView]) -> RolloutState:
        if not state.in_status(NodeStatus.PENDING):
            failed = tuple(f"{r.node}: {r.reason}" for r in state.in_status(NodeStatus.FAILED))
            state = self._write(replace(state, phase=Phase.DONE, reasons=failed))
            self._listener.event("done", rollout=self._name, mode=str(state.mode), failed=list(failed))
            return state
        now = self._clock.wall()
        if state.canary_done_at is not None and state.waves == 1 and now < state.canary_done_at + state.spec.soak_s:
            return state
        room = self._room(state)
        state, candidates, pods = self._candidates(state, nodes)
        choice = choose_wave(
            candidates, room=room, budgets=self._port.list_pdbs(),
            pod_labels={str(p.ref): dict(p.labels) for listed in pods.values() for p in listed},
            max_nodes=state.spec.canary if state.waves == 0 and state.mode is Mode.ROLLOUT else None,
        )
        if not choice.nodes and room.held and candidates and not any(room.takes([c]) for c in candidates):
            # Failed nodes stay out of service (their agents retry) and no pending node fits beside them.
            reasons = (
                *(f"{r.node}: {r.reason}" for r in state.in_status(NodeStatus.FAILED)),
                f"{room.describe_held()}: no other node fits beside them",
            )
            return self._halt(state, reasons, failed=len(room.held))
        if not choice.nodes:
            reasons = choice.held_back or ("no node fits the budgets now",)
            if reasons != state.reasons:
                state = self._write(replace(state, reasons=reasons))
                self._listener.event("wave_waiting", rollout=self._name, reasons=list(reasons))
            return state
        return self._start_wave(state, choice.nodes, nodes, pods, held_back=choice.held_back)

    def _start_wave(
        self,
        state: RolloutState,
        chosen: Sequence[NodeImpact],
        nodes: Mapping[str, NodeView],
        pods: Mapping[str, list[PodView]],
        *,
        held_back: Sequence[str],
    ) -> RolloutState:
        """Written in flight first, then relabelled, then recorded as relabelled: however often this is
        interrupted, each node is relabelled once and only from the label the rollout expects."""
        now = self._clock.wall()
        wave = state.waves + 1
        for impact in chosen:
            record = state.nodes[impact.node]
            node = nodes[impact.node]
            stale = attempt(node) if answer(node, record.target) is AgentAnswer.FAILED else None
            state = state.with_node(replace(
                record, status=NodeStatus.IN_FLIGHT, wave=wave, predicted=impact.evicts, started_at=now,
                pods_before=gpu_pods(pods.get(impact.node, [])), gpus=impact.gpus or record.gpus,
                stale_attempt=stale, reason="", labelled=False,
            ))
        state = self._write(replace(state, waves=wave, reasons=()))
        self._listener.event(
            "wave_started", rollout=self._name, wave=wave, canary=wave == 1 and state.mode is Mode.ROLLOUT,
            nodes=[n.node for n in chosen], gpus=state.spec.max_unavailable.used(list(chosen)),
            max_unavailable=str(state.spec.max_unavailable),
            predicted_evictions={n.node: list(n.evicts) for n in chosen}, held_back=list(held_back),
        )
        for impact in chosen:
            state = state.with_node(self._relabel(state.nodes[impact.node], nodes[impact.node]))
        return self._write(state)

    def _relabel(self, record: NodeRecord, node: NodeView) -> NodeRecord:
        """The node's label set to the target, only if the Node is still as read (else NodeChangedError: the
        next look decides again); the record says the rollout wrote it."""
        previous = layout_label(node)
        if previous != record.target:
            self._port.set_layout(node, record.target)
            self._listener.event("node_relabelled", rollout=self._name, node=record.node, layout=record.target,
                                 previous=previous)
        return replace(record, labelled=True)
