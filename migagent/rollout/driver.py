"""The loop that drives one rollout, through a port to the cluster and a clock: it reads the state
object, follows the nodes in flight, starts the next wave when the last one is done, and writes
every decision back with a conditional write before acting on it.

    read state (take or renew the lease) -> read the pool -> nodes in flight: success? failed?
    -> failures >= --failure-budget, or a failed canary: halt, with each node's reason
    -> nothing in flight, canary soaked: choose the least disturbing wave within --max-unavailable
       and every PDB -> write it (nodes in flight, predictions) -> relabel each node once
    -> no node pending or in flight: done

A driver that is killed leaves its lease to expire; the next one resumes from the object. A node
is written "in flight" before its label changes, and its label is changed only while it differs
from the target, so however often the drive is interrupted each node is relabelled once.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import structlog

from migagent.clock import Clock
from migagent.errors import PermanentError, TransientError
from migagent.layout.parse import parse_layout
from migagent.layout.spec import LayoutFile
from migagent.node.names import MIG_CONFIG_LABEL, OBSERVED_ANNOTATION
from migagent.node.port import NodeView, PodView
from migagent.rollout.budget import DisruptionBudget, MaxUnavailable, choose_wave
from migagent.rollout.impact import NodeImpact, predict, unreported, with_pods_now
from migagent.rollout.reported import UnreadableReportError, read_report
from migagent.rollout.reports import AgentAnswer, agent_phase, answer, attempt, failure_reason
from migagent.rollout.state import Mode, NodeRecord, NodeStatus, Phase, RolloutSpec, RolloutState

log = structlog.get_logger(__name__)

STATE_KEY = "state"
LAYOUTS_KEY = "layouts"
FORGIVE_CURRENT = "*"
"""A resumed node's stale_attempt until the driver next looks: whatever failed attempt it shows then
(its agent may have retried and failed again while the rollout was halted) is forgiven."""


class StoredObject(Protocol):
    @property
    def data(self) -> Mapping[str, str]: ...

    @property
    def resource_version(self) -> str: ...


class RolloutPort(Protocol):
    """What a driver needs from the cluster (kube.rollout_api.RolloutApi)."""

    def list_nodes(self, selector: str) -> list[NodeView]: ...

    def set_layout(self, node: str, layout: str | None) -> NodeView: ...

    def list_pods_on_node(self, node: str) -> list[PodView]: ...

    def list_pdbs(self) -> Sequence[DisruptionBudget]: ...

    def read_state(self, rollout: str) -> StoredObject | None: ...

    def create_state(self, rollout: str, data: Mapping[str, str]) -> str: ...

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


class RolloutError(PermanentError):
    """A rollout that cannot be started or driven as asked (one line, nothing changed)."""


class HeldElsewhereError(RolloutError):
    """Another driver holds the rollout's lease."""


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


def impact_of(node: NodeView, layout: LayoutFile, target: str) -> NodeImpact:
    try:
        reported = read_report(node.annotations.get(OBSERVED_ANNOTATION))
    except UnreadableReportError as error:
        return unreported(node.name, str(error))
    return predict(node.name, reported, layout, target)


def encode(state: RolloutState) -> dict[str, str]:
    return {STATE_KEY: state.dumps(), LAYOUTS_KEY: state.layouts}


def decode(rollout: str, stored: StoredObject) -> RolloutState:
    if STATE_KEY not in stored.data:
        raise RolloutError(f"rollout {rollout}: its state object has no {STATE_KEY!r} key")
    return RolloutState.loads(
        stored.data[STATE_KEY], layouts=stored.data.get(LAYOUTS_KEY, ""), resource_version=stored.resource_version
    )


def initial_state(
    name: str, spec: RolloutSpec, layouts: str, nodes: Sequence[NodeView], targets: Mapping[str, str] | None = None
) -> RolloutState:
    """Every node in scope, with its layout now (the undo target); nodes already at the layout are done.

    `targets` (node -> layout, from `migagent advise`) gives each node its own layout; only those nodes
    are in scope then, and `spec.layout` only names the rollout's origin."""
    layout = parse_layout(layouts, source=f"rollout {name} layouts")
    wanted = dict(targets) if targets is not None else {node.name: spec.layout for node in nodes}
    unknown = sorted(set(wanted.values()) - set(layout.configs))
    if unknown:
        raise RolloutError(f"-c {unknown[0]}: no such layout; valid: {', '.join(layout.names) or 'none'}")
    MaxUnavailable.parse(spec.max_unavailable)
    nodes = [node for node in nodes if node.name in wanted]
    if not nodes:
        raise RolloutError(f"-l {spec.selector}: selects no node")
    records: dict[str, NodeRecord] = {}
    for node in nodes:
        previous = node.labels.get(MIG_CONFIG_LABEL)
        target = wanted[node.name]
        impact = impact_of(node, layout, target)
        if answer(node, target) is AgentAnswer.SUCCESS:
            status, reason = NodeStatus.DONE, "already at the layout"
        elif not impact.plannable:
            status, reason = NodeStatus.SKIPPED, impact.problem
        else:
            status, reason = NodeStatus.PENDING, ""
        records[node.name] = NodeRecord(
            node=node.name, status=status, target=target, previous=previous, gpus=impact.gpus, reason=reason
        )
    pool = sum(r.gpus for r in records.values())
    budget = MaxUnavailable.parse(spec.max_unavailable)
    for record in records.values():
        if record.status is NodeStatus.PENDING:
            big = budget.too_big(NodeImpact(node=record.node, gpus=record.gpus), pool)
            if big is not None:
                raise RolloutError(big)
    return RolloutState(name=name, spec=spec, layouts=layouts, nodes=records)


def undo_state(state: RolloutState) -> RolloutState:
    """Every node the rollout relabelled goes back to its previous layout, in waves with the same budgets."""
    nodes: dict[str, NodeRecord] = {}
    for name, record in state.nodes.items():
        changed = record.status in (NodeStatus.IN_FLIGHT, NodeStatus.DONE, NodeStatus.FAILED) and (
            record.wave is not None
        )
        if changed:
            nodes[name] = NodeRecord(
                node=name, status=NodeStatus.PENDING, target=record.previous, previous=record.target,
                gpus=record.gpus, stale_attempt=None,
            )
        else:
            nodes[name] = replace(record, status=NodeStatus.SKIPPED, reason="not changed by the rollout")
    return replace(
        state, mode=Mode.UNDO, phase=Phase.RUNNING, nodes=nodes, canary_done_at=None, reasons=(), waves=0,
    )


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
        self._started: dict[str, float] = {}

    # --- the object ---------------------------------------------------------------------------------

    def load(self) -> RolloutState:
        stored = self._port.read_state(self._name)
        if stored is None:
            raise RolloutError(f"no rollout {self._name} (no state object); start it with `migagent rollout start`")
        return decode(self._name, stored)

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
                    # A conditional write lost to another writer (pause, resume, undo), or the API server
                    # hiccupped: read again and decide again.
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
        state = self._follow(state, nodes)
        if state.phase in (Phase.RUNNING, Phase.HALTED):
            state = self._maybe_halt(state)
        if state.phase is Phase.RUNNING and not state.in_status(NodeStatus.IN_FLIGHT):
            state = self._next_wave(state, nodes)
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
            if record.stale_attempt == FORGIVE_CURRENT:  # resumed: the failure showing now is the old one
                failing = answer(node, record.target) is AgentAnswer.FAILED
                record = replace(record, stale_attempt=attempt(node) if failing else None)
                state = state.with_node(record)
                changed = True
            if node.labels.get(MIG_CONFIG_LABEL) != record.target:
                self._relabel(record, node)  # a driver stopped between writing the wave and this label
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
        state = self._write(replace(state, phase=Phase.HALTED, reasons=reasons))
        self._listener.event("halted", rollout=self._name, failed=len(failed),
                             failure_budget=state.spec.failure_budget, reasons=list(reasons),
                             in_flight=[r.node for r in state.in_status(NodeStatus.IN_FLIGHT)])
        return state

    def _next_wave(self, state: RolloutState, nodes: Mapping[str, NodeView]) -> RolloutState:
        pending = state.in_status(NodeStatus.PENDING)
        if not pending:
            failed = tuple(f"{r.node}: {r.reason}" for r in state.in_status(NodeStatus.FAILED))
            state = self._write(replace(state, phase=Phase.DONE, reasons=failed))
            self._listener.event("done", rollout=self._name, mode=str(state.mode), failed=list(failed))
            return state
        now = self._clock.wall()
        if state.canary_done_at is not None and state.waves == 1 and now < state.canary_done_at + state.spec.soak_s:
            return state
        layout = parse_layout(state.layouts, source=f"rollout {self._name} layouts")
        budget = MaxUnavailable.parse(state.spec.max_unavailable)
        pool = sum(r.gpus for r in state.nodes.values() if r.status is not NodeStatus.SKIPPED)
        holding = [NodeImpact(node=r.node, gpus=r.gpus) for r in state.in_status(NodeStatus.FAILED)]
        room = budget.limit(pool) - budget.used(holding)
        candidates: list[NodeImpact] = []
        pods: dict[str, list[PodView]] = {}
        for record in pending:
            node = nodes.get(record.node)
            if node is None:
                state = state.with_node(replace(record, status=NodeStatus.SKIPPED, reason="the node is gone"))
                continue
            if record.target is None:
                candidates.append(NodeImpact(node=record.node, gpus=record.gpus))
                continue
            impact = impact_of(node, layout, record.target)
            if not impact.plannable:
                state = state.with_node(replace(record, status=NodeStatus.SKIPPED, reason=impact.problem))
                self._listener.event("node_skipped", rollout=self._name, node=record.node, reason=impact.problem)
                continue
            pods[record.node] = self._port.list_pods_on_node(record.node)
            candidates.append(with_pods_now(impact, gpu_pods(pods[record.node])))
        labels = {str(p.ref): dict(p.labels) for listed in pods.values() for p in listed}
        choice = choose_wave(
            candidates, room=room, max_unavailable=budget, budgets=self._port.list_pdbs(), pod_labels=labels,
            max_nodes=state.spec.canary if state.waves == 0 and state.mode is Mode.ROLLOUT else None,
        )
        if not choice.nodes and holding and candidates and min(budget.used([c]) for c in candidates) > room:
            # Failed nodes stay out of service (their agents retry) and no pending node fits beside them.
            reasons = (
                *(f"{r.node}: {r.reason}" for r in state.in_status(NodeStatus.FAILED)),
                f"{len(holding)} failed node(s) hold {budget.used(holding)} of --max-unavailable {budget}:"
                " no other node fits beside them",
            )
            state = self._write(replace(state, phase=Phase.HALTED, reasons=reasons))
            self._listener.event("halted", rollout=self._name, failed=len(holding),
                                 failure_budget=state.spec.failure_budget, reasons=list(reasons))
            return state
        if not choice.nodes:
            reasons = choice.held_back or ("no node fits the budgets now",)
            if reasons != state.reasons:
                state = self._write(replace(state, reasons=reasons))
                self._listener.event("wave_waiting", rollout=self._name, reasons=list(reasons))
            return state
        wave = state.waves + 1
        for impact in choice.nodes:
            record = state.nodes[impact.node]
            node = nodes[impact.node]
            stale = attempt(node) if answer(node, record.target) is AgentAnswer.FAILED else None
            state = state.with_node(replace(
                record, status=NodeStatus.IN_FLIGHT, wave=wave, predicted=impact.evicts, started_at=now,
                pods_before=gpu_pods(pods.get(impact.node, [])), gpus=impact.gpus or record.gpus,
                stale_attempt=stale, reason="",
            ))
        state = self._write(replace(state, waves=wave, reasons=()))
        self._listener.event(
            "wave_started", rollout=self._name, wave=wave, canary=wave == 1 and state.mode is Mode.ROLLOUT,
            nodes=[n.node for n in choice.nodes], gpus=budget.used(list(choice.nodes)),
            max_unavailable=str(budget), predicted_evictions={n.node: list(n.evicts) for n in choice.nodes},
            held_back=list(choice.held_back),
        )
        for impact in choice.nodes:
            self._relabel(state.nodes[impact.node], nodes[impact.node])
        return state

    def _relabel(self, record: NodeRecord, node: NodeView) -> None:
        if node.labels.get(MIG_CONFIG_LABEL) == record.target:
            return
        self._port.set_layout(record.node, record.target)
        self._listener.event("node_relabelled", rollout=self._name, node=record.node, layout=record.target,
                             previous=node.labels.get(MIG_CONFIG_LABEL))


def resumed(state: RolloutState) -> RolloutState:
    """`rollout resume`: a paused rollout runs on; a halted one waits again on its failed nodes (their
    old failure forgiven: only a new attempt that fails counts) and then starts the next waves."""
    nodes = {
        name: replace(record, status=NodeStatus.IN_FLIGHT, reason="", stale_attempt=FORGIVE_CURRENT)
        if record.status is NodeStatus.FAILED else record
        for name, record in state.nodes.items()
    }
    return replace(state, phase=Phase.RUNNING, nodes=nodes, reasons=())
