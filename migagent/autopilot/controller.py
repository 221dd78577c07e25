"""The autopilot's loop: one look per poll, through its port and a clock.

    read its object (pause switch, changes made, rollout in flight, history)
    -> a rollout in flight: drive it one step (the rollout's own driver: waves, budgets, canary,
       halt); when it is done or halts, record that; start nothing else meanwhile
    -> otherwise: the opted-in nodes, every GPU pod, the budgets and the layouts -> decide
    -> a new decision: write it (history, changes, the rollout's name) conditionally, then create the
       rollout and record an Event per node (or one on its object)

The object is written before the rollout is created: an autopilot killed in between finds a rollout
name without a rollout next time and clears it, rather than starting a second rollout over the
same nodes. `autopilot pause` stops new changes, and the rollout it drives stops after the wave in
flight (its nodes in flight finish); `autopilot resume` lets that rollout run on. Looks start every
--poll seconds; a look that overruns its interval makes the looks it overlapped skipped, and says so.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import structlog

from migagent.autopilot.decide import PAUSED, Guardrails, decide
from migagent.autopilot.port import STATE_KEY, AutopilotPort
from migagent.autopilot.state import AutopilotState, CorruptAutopilotStateError, Decision, Verdict
from migagent.clock import Clock
from migagent.demand.advise import CandidateCache
from migagent.errors import MigAgentError, TransientError
from migagent.rollout.budget import MaxUnavailable
from migagent.rollout.codec import encode, repair_or_remove
from migagent.rollout.driver import RolloutDriver
from migagent.rollout.errors import HeldElsewhereError, RolloutError
from migagent.rollout.port import RolloutListener, create, new_holder
from migagent.rollout.scope import initial_state
from migagent.rollout.spec import ADVICE_LAYOUT, DEFAULT_MAX_UNAVAILABLE, RolloutSpec
from migagent.rollout.state import Layouts, NodeStatus, Phase, RolloutState

log = structlog.get_logger(__name__)

EVENT_REASONS = {
    Verdict.CHANGED: "MigAutopilotChanged",
    Verdict.DRY_RUN: "MigAutopilotDryRun",
    Verdict.HELD: "MigAutopilotHeld",
    Verdict.NO_CHANGE: "MigAutopilotNoChange",
    Verdict.ROLLOUT_DONE: "MigAutopilotRolloutDone",
    Verdict.ROLLOUT_HALTED: "MigAutopilotRolloutHalted",
}
_CACHE_KEPT = 4096
_STOPPED_BY_PAUSE = "the autopilot is paused (migagent autopilot resume)"


@dataclass(frozen=True)
class RolloutBudgets:
    """The budgets of each rollout the autopilot starts (`migagent rollout start`'s flags)."""

    max_unavailable: MaxUnavailable = DEFAULT_MAX_UNAVAILABLE
    canary: int = 1
    soak_s: float = 0.0
    failure_budget: int = 1
    lease_s: float = 30.0


def load(port: AutopilotPort) -> AutopilotState:
    stored = port.read_autopilot()
    if stored is None:
        return AutopilotState()
    try:
        return AutopilotState.loads(stored.data.get(STATE_KEY, ""), resource_version=stored.resource_version)
    except (ValueError, TypeError, KeyError, AttributeError) as error:  # a hand edit: said, never guessed past
        forgets = "that forgets its pause, its history and the changes its cool-downs count"
        raise CorruptAutopilotStateError(
            f"the autopilot's state (configmap {stored.namespace}/{stored.object_name}, key {STATE_KEY!r}) cannot"
            f" be read: {error}; {repair_or_remove(stored, forgets)}"
        ) from None


def save(port: AutopilotPort, state: AutopilotState) -> AutopilotState:
    version = port.write_autopilot({STATE_KEY: state.dumps()}, state.resource_version)
    return replace(state, resource_version=version)


def event_message(decision: Decision, node: str | None) -> str:
    detail = decision.nodes.get(node, {}) if node is not None else {}
    parts = [f"{decision.verdict}"]
    if detail:
        parts.append(f"{detail.get('from')} -> {detail.get('to')}: serves {len(detail.get('serves', ()))} pod(s),"
                     f" evicts {len(detail.get('evicts', ()))}, GPUs changed {len(detail.get('gpus_changed', ()))}")
    if decision.rollout:
        parts.append(f"rollout {decision.rollout}")
    parts += decision.reasons
    return "; ".join(parts)


class Autopilot:
    def __init__(
        self,
        port: AutopilotPort,
        guardrails: Guardrails,
        *,
        clock: Clock,
        listener: RolloutListener,
        budgets: RolloutBudgets | None = None,
        holder: str | None = None,
    ) -> None:
        self._port = port
        self.guardrails = guardrails
        self._clock = clock
        self._listener = listener
        self._budgets = budgets or RolloutBudgets()
        self.holder = holder or new_holder()
        self._cache: CandidateCache = {}
        self._layouts: Layouts | None = None

    def run(self, stop: threading.Event, poll_s: float) -> None:
        """A look every `poll_s` until `stop`. A look that runs past its interval makes the looks it overlaps
        skipped, never queued: the next starts on the interval after, and the skip is said."""
        due = self._clock.monotonic()
        while not stop.is_set():
            started = self._clock.monotonic()
            try:
                self.step()
            except TransientError as error:  # a conflicting write (pause), an API hiccup: look again next poll
                self._listener.event("autopilot_step_retried", error=str(error))
            due += poll_s
            if (late := self._clock.monotonic() - due) > 0:
                skipped = int(late // poll_s) + 1
                due += skipped * poll_s
                self._listener.event("autopilot_looks_skipped", looks=skipped, poll_s=poll_s,
                                     took_s=round(self._clock.monotonic() - started, 1))
            self._clock.wait(stop, due - self._clock.monotonic())

    def step(self) -> AutopilotState:
        state = load(self._port)
        if state.rollout is not None:
            return self._drive(state)
        layouts = self._port.read_layouts()
        nodes = self._port.list_demand_nodes(self.guardrails.selector)
        if len(self._cache) > _CACHE_KEPT:
            self._cache.clear()
        outcome = decide(
            self._clock.wall(), self.guardrails, state, nodes=nodes, pods=self._port.list_gpu_pods(),
            layout=self._parsed(layouts).file, budgets=self._port.list_pdbs(),
            cache=self._cache,
        )
        if outcome.decision is None:
            return state
        if not outcome.targets:
            return self._record(state, outcome.decision)
        name = f"autopilot-{int(self._clock.wall())}"
        spec = RolloutSpec(
            selector=self.guardrails.selector, layout=ADVICE_LAYOUT, max_unavailable=self._budgets.max_unavailable,
            canary=self._budgets.canary, soak_s=self._budgets.soak_s, failure_budget=self._budgets.failure_budget,
            lease_s=self._budgets.lease_s,
        )
        try:
            rollout = initial_state(name, spec, self._parsed(layouts), [n.view for n in nodes], outcome.targets)
        except MigAgentError as error:
            held = replace(outcome.decision, verdict=Verdict.HELD, reasons=(str(error),))
            return self._record(state, held)
        decision = replace(outcome.decision, rollout=name)
        state = replace(state.with_changes(outcome.changes, decision.at), rollout=name)
        state = self._record(state, decision, dirty=True)
        create(self._port, rollout, holder=self.holder, now=self._clock.wall())  # it drives it: held from the start
        return state

    def _parsed(self, layouts: str) -> Layouts:
        """The layout file, parsed again only when its text changed."""
        if self._layouts is None or self._layouts.text != layouts:
            self._layouts = Layouts.parse(layouts, source="the autopilot's layouts")
        return self._layouts

    def _record(self, state: AutopilotState, decision: Decision, *, dirty: bool = False) -> AutopilotState:
        """Write `decision` (unless it repeats the last one) and whatever else changed (`dirty`), then its Events."""
        recorded = state.record(decision)
        if recorded is state and not dirty:
            return state  # the same as last time: no new record, no new Event
        saved = save(self._port, recorded)
        if recorded is state:
            return saved
        targets: list[str | None] = [*sorted(decision.nodes)] or [None]
        for node in targets:
            try:
                self._port.record_event(node=node, reason=EVENT_REASONS[decision.verdict],
                                        message=event_message(decision, node),
                                        warning=decision.verdict in (Verdict.ROLLOUT_HALTED, Verdict.NO_CHANGE))
            except MigAgentError as error:  # the history has it; an Event is best effort
                log.warning("autopilot_event_not_recorded", node=node, error=str(error))
        log.info("autopilot_decision", **decision.to_json())
        return saved

    def _drive(self, state: AutopilotState) -> AutopilotState:
        name = state.rollout
        assert name is not None
        driver = RolloutDriver(self._port, name, clock=self._clock, listener=self._listener, holder=self.holder)
        try:
            self._hold(driver, name, paused=state.paused)
            rollout = driver.step()
        except HeldElsewhereError:
            return state  # a person drives it now (rollout resume/undo); look again later
        except RolloutError as error:  # its object is gone (never created, or deleted by an admin)
            done = Decision(self._clock.wall(), Verdict.ROLLOUT_DONE, (str(error),), rollout=name)
            return self._record(replace(state, rollout=None), done, dirty=True)
        if rollout.phase is Phase.DONE:
            driver.release()
            done = Decision(self._clock.wall(), Verdict.ROLLOUT_DONE, rollout.reasons, _outcomes(rollout), rollout=name)
            return self._record(replace(state, rollout=None), done, dirty=True)
        if rollout.phase is Phase.PAUSED and not rollout.in_status(NodeStatus.IN_FLIGHT) and state.paused:
            stopped = (PAUSED, f"rollout {name} stopped after the wave in flight; resumed, it runs on")
            return self._record(state, Decision(self._clock.wall(), Verdict.HELD, stopped, _outcomes(rollout),
                                                rollout=name))
        if rollout.phase is Phase.HALTED and not rollout.in_status(NodeStatus.IN_FLIGHT):
            reasons = (*rollout.reasons, f"clear the fault, then `migagent rollout resume {name}` or `undo {name}`")
            halted = Decision(self._clock.wall(), Verdict.ROLLOUT_HALTED, reasons, _outcomes(rollout), rollout=name)
            return self._record(state, halted)
        return state


    def _hold(self, driver: RolloutDriver, name: str, *, paused: bool) -> None:
        """Paused: the rollout starts no new wave (those in flight finish); resumed: one it paused runs on."""
        rollout = driver.load()
        if paused and rollout.phase is Phase.RUNNING:
            held = replace(rollout, phase=Phase.PAUSED, reasons=(_STOPPED_BY_PAUSE,))
        elif not paused and rollout.phase is Phase.PAUSED and rollout.reasons == (_STOPPED_BY_PAUSE,):
            held = replace(rollout, phase=Phase.RUNNING, reasons=())
        else:
            return
        self._port.replace_state(name, encode(held), rollout.resource_version)


def _outcomes(rollout: RolloutState) -> dict[str, dict[str, object]]:
    return {
        r.node: {"from": r.previous, "to": r.target, "status": str(r.status), "evicts": list(r.evicted),
                 "predicted": list(r.predicted), "reason": r.reason}
        for r in rollout.nodes.values()
    }
