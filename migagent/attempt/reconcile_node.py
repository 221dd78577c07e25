"""One reconcile of the node: from the desired label to a reported state, undoing everything on failure.

    read node -> held by a failed attempt's back-off and nothing it depends on changed? done.
    -> OBSERVE (layout file, NVML) -> PLAN -> nothing to do? report success, done.
       (the layout bytes, the observation, the pods and the resolved layout are read once, into
       `AttemptReads`, and shared by the back-off digest, the preflight, the plan and the gate; the
       pods only once the attempt will write, so a settled node's re-check lists none)
    else: PLAN again with the pods per GI (fewest evicted) -> safety gate (attempt.drain.gate): a change
          that needs pods gone that cannot be evicted is refused here, before any write to the Node
          -> pending -> CORDON -> PAUSE (device plugin) -> DRAIN (only pods on disturbed devices)
          -> APPLY (journaled engine) -> RESTART_PLUGIN -> READVERTISE -> success -> UNCORDON
    a label changed at a safe point of DRAIN..READVERTISE: back to OBSERVE, keeping the window open.

An attempt reads without the node's Lease; at its first write (attempt.first_write) one that does
not hold it stops, and runs again from fresh reads (a new `AttemptReads`) once the Lease is taken.
The plan travels on in `Target` with its hash; the engine runs it as it is unless the GPUs changed.
`PhaseOrder` checks each phase's start against `phases.may_follow` as the attempt runs.
Every disturbance of the node and its undo belongs to the attempt's `ChangeWindow`
(attempt.window.change_window); `_fail` is the one place that unwinds it and reports `failed`. The window
starts with whatever an interrupted attempt left on the Node, so a restarted agent finishes or
undoes that too. Status writes are attempt.report.node_report's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import structlog

from migagent.attempt.advertise.expected import check_advertisable
from migagent.attempt.advertise.readvertise import Advertisement
from migagent.attempt.apply import apply_change
from migagent.attempt.backoff import RetryHold, attempt_number
from migagent.attempt.backoff_check import BackoffCheck
from migagent.attempt.blockers import learned_from, refuse_if_still_there
from migagent.attempt.drain.gate import Target, plan_and_gate
from migagent.attempt.drain.step import drain_for_change
from migagent.attempt.first_write import FirstWriteGuard, WritePermit
from migagent.attempt.phases import AgentPhase, Outcome, PhaseOrder
from migagent.attempt.ports import AgentPorts, AgentSettings, PhaseHook, ReconcileReport
from migagent.attempt.preflight import Preflight
from migagent.attempt.reads import AttemptReads
from migagent.attempt.report.node_report import NodeReport
from migagent.attempt.report.status import StatusReporter
from migagent.attempt.supersede import LabelCheckpoint, LayoutSuperseded, Refused
from migagent.attempt.undo import ApplyFailedError, AttemptMarker, StopRequested, failure_reason
from migagent.attempt.window.change_window import ChangeWindow
from migagent.errors import PermanentError
from migagent.node.names import ATTEMPT_ANNOTATION, MIG_CONFIG_LABEL, NEXT_RETRY_ANNOTATION
from migagent.node.names import EventReason as Event
from migagent.node.port import NodeView
from migagent.planning import plan

log = structlog.get_logger(__name__)


class NodeReconcile:
    """One attempt; build a new one per reconcile (its change window is the attempt's own)."""

    def __init__(
        self,
        ports: AgentPorts,
        settings: AgentSettings,
        *,
        stop: threading.Event | None = None,
        phase_hook: PhaseHook | None = None,
        current_label: Callable[[], str | None] | None = None,
        heartbeat: Callable[[], None] | None = None,
        hold: RetryHold | None = None,
        may_write: Callable[[], bool] | None = None,
        node_from_watch: bool = False,
    ) -> None:
        """`current_label`: the label value the watch saw last (a change mid-attempt supersedes it);
        `heartbeat`: beaten at every safe point, so liveness sees a long change progressing;
        `hold`: the last failure's back-off as the agent remembers it (else the Node's annotation);
        `may_write`: whether this process holds the node's Lease (attempt.first_write; None: no Lease);
        `node_from_watch`: the Node may be the watch's newest (nobody else wrote since this agent did)."""
        self._node_from_watch = node_from_watch
        self._preflight = ports.preflight or Preflight(ports.api)
        self._permit = WritePermit(may_write, lambda pods: self._preflight.sole_owner(self._read_node(), pods=pods))
        api = FirstWriteGuard(ports.api, self._permit.grant)
        self._current_label = current_label
        self._hold = hold
        self._depends: str | None = None
        self._heartbeat = heartbeat
        self._p = ports
        self._settings = settings
        self._stop = stop
        self._hook = phase_hook
        self._status = StatusReporter(api)
        self._report = NodeReport(api, self._status, clock=ports.clock, pod_resources=ports.pod_resources)
        self._window = ChangeWindow(
            api,
            ports.restarter,
            self._status,
            clock=ports.clock,
            post_change=ports.post_change,
            settle_gpus=ports.engine.settle,
        )
        self._advertisement = Advertisement(ports, settings, self._status, stop=stop)
        self._backoff = BackoffCheck(ports, settings)
        self._order = PhaseOrder()
        self._attempt = 1
        self._layout: str | None = None
        self._reads: AttemptReads | None = None
        self._node: NodeView | None = None
        self._log = log.bind(node=ports.api.node_name)

    def run(self) -> ReconcileReport:
        try:
            node = self._read_node()
        except Exception as exc:
            self._log.error("node_unreadable", error=str(exc))
            return ReconcileReport(Outcome.FAILED, self._attempt, f"reading the node: {exc}", node_read=False)
        try:
            outcome = self._run(node)
            return ReconcileReport(outcome, self._attempt, hold=self._hold if outcome is Outcome.HELD else None)
        except StopRequested as stop:
            return self._stopped(stop)
        except Exception as exc:  # every failure, of any kind, is undone and reported in one place
            if self._stop is not None and self._stop.is_set():
                return self._stopped(exc)  # a wait the stop request cut short: not a failure
            return self._fail(exc)

    # -- the flow -------------------------------------------------------------------------------

    def _run(self, node: NodeView) -> Outcome:
        leftovers = self._adopt(node)
        name = node.labels.get(MIG_CONFIG_LABEL)
        if name is None:
            self._finish_leftovers()
            self._report.no_desired_layout(node)
            self._log.info("no_desired_layout", label=MIG_CONFIG_LABEL)
            return Outcome.NO_DESIRED_LAYOUT
        reads = self._reads = self._read(name)
        if not leftovers and self._backoff.holds(self._hold, node, reads):
            return Outcome.HELD
        strategy = self._preflight.strategy(
            node, self._settings.mig_strategy, reads.observation, auto=self._settings.mig_strategy_auto
        )
        self._settings = replace(self._settings, mig_strategy=strategy)
        self._advertisement.use(self._settings)
        target = self._observe_and_resolve(reads)
        if target.steps.is_empty:
            advertising = self._advertisement.current(node, target.observation, known_behind=bool(self._window.open))
            if advertising is not None:
                self._finish_leftovers()
                reported = self._report.already_applied(advertising, target)
                self._log.info("layout_already_applied", reported=reported)
                return Outcome.UNCHANGED
            self._permit.grant()
        else:
            self._permit.require_lease()  # before the pod list: an attempt without the Lease runs again
            self._permit.grant(reads.pods())  # one list serves the sole-owner check, the gate and the digest
            target = self._decide(target, reads)
        if self._hold is not None:  # what the last attempt met after its cordon: still in the way?
            refuse_if_still_there(
                self._hold.blockers, reads.pods(), evicting=target.evict, pausing=self._p.restarter.pauses
            )
        return self._reconfigure(target, node, reads)

    def _read_node(self) -> NodeView:
        """The Node: the watch's newest when the agent allows it (a re-check without the Lease, which
        writes nothing, or one that took the Lease back from itself), so an idle re-check costs no
        request; else read afresh (another agent may have written since the watch's last event)."""
        if self._node is not None:
            return self._node
        updates = self._p.node_updates
        if self._node_from_watch and updates is not None and updates.watching:
            _, watched = updates.node_after(-1, 0.0)
            if watched is not None:
                return watched
        return self._p.api.get_node()

    def _read(self, name: str) -> AttemptReads:
        """This round's reads of the layout file, NVML and the pods, each made once, when first asked.
        An attempt that stops for the Lease (attempt.first_write) is run again with new ones."""
        return AttemptReads(
            name, config_file=self._settings.config_file, observe=self._p.driver.observe,
            list_pods=self._p.api.list_pods_on_node,
        )

    def _observe_and_resolve(self, reads: AttemptReads) -> Target:
        self._applying(reads.name)
        with self._in_phase(AgentPhase.OBSERVE):
            reads.layout()
            observation = reads.observation()
        with self._in_phase(AgentPhase.PLAN):
            desired = reads.desired()
            check_advertisable(desired, observation, self._settings.mig_strategy)
            return Target(reads.name, desired, observation, plan(observation, desired))

    def _applying(self, name: str) -> None:
        self._layout = name
        self._log = self._log.bind(layout=name, attempt=self._attempt)

    def _decide(self, target: Target, reads: AttemptReads) -> Target:
        with self._in_phase(AgentPhase.PLAN):
            return plan_and_gate(
                self._p.api, self._p.pod_resources, target,
                force_delete=self._settings.force_delete, gate=self._settings.gate, pods=reads.pods(),
            )

    def _reconfigure(self, target: Target, node: NodeView, reads: AttemptReads) -> Outcome:
        self._depends = self._backoff.digest(node, reads)  # before the first write: what a back-off holds on
        self._p.engine.check_storage(target.steps)  # a full or read-only journal fails here, node untouched
        self._report.pending(target, attempt=self._attempt)
        with self._in_phase(AgentPhase.CORDON):
            self._window.cordon(target.name)
        with self._in_phase(AgentPhase.PAUSE):
            self._window.pause()
        refused: Refused | None = None
        while True:
            checkpoint = LabelCheckpoint(
                self._current_label, target.name, heartbeat=self._heartbeat,
                ignoring=None if refused is None else refused.label,
            )
            try:
                return self._change(target, checkpoint)
            except LayoutSuperseded as newer:
                # One disruption per change: re-plan from what the GPUs hold now, keeping the window open.
                target, refused = self._superseded(target, newer.layout, refused)
                self._report.pending(target, attempt=self._attempt)
                with self._in_phase(AgentPhase.PAUSE):
                    self._window.pause_again()

    def _superseded(self, target: Target, label: str, refused: Refused | None) -> tuple[Target, Refused | None]:
        """The target after the label changed to `label` mid-change, and the label refused meanwhile.

        A label no layout answers (a typo, a layout that does not fit or would evict what cannot be
        evicted) does not stop the change in flight half way: it is finished to the last valid
        layout, and the refusal raised once it is (the success write meets that label again). Before
        any GPU changed, the refusal is raised at once: the GPUs still hold the starting layout."""
        self._log.info("layout_superseded", applying=target.name, now=label)
        if label != (refused.label if refused is not None else None):
            self._status.event(
                Event.RECONFIGURING, f"label changed to {label} while {target.name} was applied: re-planning"
            )
        reads = self._reads = self._read(label)  # the GPUs and the file as they are now
        try:
            return self._decide(self._observe_and_resolve(reads), reads), None
        except PermanentError as exc:
            if not self._window.gpus_touched:
                raise
            if refused is not None and label == refused.label:  # only the success write sees it: finished
                raise Refused(label, exc).after_finishing(target.name) from exc
            self._log.warning("superseding_label_refused", label=label, finishing=target.name, error=str(exc))
            self._status.event(
                Event.RECONFIGURING, f"label changed to {label}, which cannot be applied ({exc}); finishing"
                f" {target.name} first",
            )
            return self._finishing(target, reads), Refused(label, exc)

    def _finishing(self, target: Target, reads: AttemptReads) -> Target:
        """The layout in flight planned from the GPUs as just observed (`reads`: the refused label's). It
        is the layout as resolved when the change began, not read again: the file that came with the
        refused label may be broken or may no longer hold it, and the GPUs it was resolved for are the same."""
        self._applying(target.name)
        same = self._reads = AttemptReads(
            target.name, config_file=self._settings.config_file, observe=reads.observation, list_pods=reads.pods,
        )
        observation = same.observation()
        with self._in_phase(AgentPhase.PLAN):
            resumed = Target(target.name, target.desired, observation, plan(observation, target.desired))
        return self._decide(resumed, same)

    def _change(self, target: Target, checkpoint: LabelCheckpoint) -> Outcome:
        """Drain, apply, re-advertise, report; LayoutSuperseded from any safe point on the way."""
        with self._in_phase(AgentPhase.DRAIN):
            drain_for_change(
                self._p, self._settings, self._status, steps=target.steps, observation=target.observation,
                stop=self._stop, checkpoint=checkpoint,
            )
        with self._in_phase(AgentPhase.APPLY):
            self._window.gpus_may_change()
            self._window.before_change()
            if apply_change(self._p, self._status, target, checkpoint=checkpoint):
                return Outcome.REBOOTING  # cordon and paused labels stay until the agent resumes after the reboot
        with self._in_phase(AgentPhase.RESTART_PLUGIN):
            self._window.after_change()
            self._window.resume_plugin()
        with self._in_phase(AgentPhase.READVERTISE):
            after = self._advertisement.after_change(target.name, checkpoint)
        self._report.success(target, after)
        self._layout = None  # recorded as applied: a stop from here on only closes the window
        with self._in_phase(AgentPhase.UNCORDON):
            self._window.uncordon()
        self._p.listener.layout_applied(target.name)
        self._log.info("layout_applied")
        return Outcome.APPLIED

    # -- leftovers, phases, failure ---------------------------------------------------------------

    def _adopt(self, node: NodeView) -> tuple[str, ...]:
        """Take over what an interrupted attempt left on the Node, so this attempt ends it either way."""
        self._node = node
        self._hold = self._hold or RetryHold.from_annotation(node.annotations.get(NEXT_RETRY_ANNOTATION))
        previous = AttemptMarker.from_annotation(node.annotations.get(ATTEMPT_ANNOTATION))
        self._attempt = attempt_number(previous, self._hold)
        leftovers = self._window.adopt(node)
        if leftovers:
            self._log.warning("interrupted_attempt_found", leftovers=leftovers, previous_attempt=previous)
        return leftovers

    def _finish_leftovers(self) -> None:
        failures = self._window.unwind()
        if failures:
            raise ApplyFailedError(f"could not undo an interrupted attempt: {'; '.join(failures)}")

    @contextmanager
    def _in_phase(self, phase: AgentPhase) -> Iterator[None]:
        if self._stop is not None and self._stop.is_set():
            raise StopRequested(f"stop requested before {phase.value}")
        self._order.enter(phase)
        if self._hook is not None:
            self._hook(phase)
        started = self._p.clock.monotonic()
        try:
            yield
        finally:
            self._p.listener.phase_finished(phase, self._p.clock.monotonic() - started)

    def _stopped(self, why: Exception) -> ReconcileReport:
        """A stop mid-change hands the open window to the next agent (one cordon episode across the
        handover), unless the change is over (success recorded) or abandoned (no label): then the
        GPUs are settled and the window closed."""
        self._log.info("attempt_stopped", phase=self._order.current, open=self._window.open, why=str(why))
        if self._window.open and self._layout is not None and self._still_wanted():
            self._window.hand_over(layout=self._layout, attempt=self._attempt)
        else:
            self._window.abandon()
        return ReconcileReport(Outcome.STOPPED, self._attempt)

    def _still_wanted(self) -> bool:
        try:  # the watch's last value; None (removed, or not seen yet) is confirmed on the Node
            label = self._current_label() if self._current_label is not None else None
            label = label or self._p.api.get_node().labels.get(MIG_CONFIG_LABEL)
        except Exception:  # the API server is gone too: leave the window for the successor to judge
            return True
        return label is not None

    def _fail(self, error: Exception) -> ReconcileReport:
        """The one place an attempt fails: GPUs made consistent, undo in reverse order, report failed."""
        phase = self._order.current.value if self._order.current is not None else "start"
        undo_started = self._p.clock.monotonic()
        undo_failures = self._window.abandon()
        self._p.listener.phase_finished(AgentPhase.UNDO, self._p.clock.monotonic() - undo_started)
        message = f"{phase}: {error}"
        if undo_failures:
            message += f" (undo incomplete, retried next attempt: {'; '.join(undo_failures)})"
        reason = failure_reason(error)
        reads = self._reads if self._layout is not None else None
        hold = self._backoff.after_failure(
            self._node, reads, depends=self._depends, failures=self._attempt, blockers=learned_from(error)
        )
        self._log.error("attempt_failed", phase=phase, reason=str(reason), error=str(error), retry_at=hold.at)
        try:
            self._status.failed(reason, message, attempt=self._attempt, next_retry=hold.to_annotation())
        except Exception as report_error:  # held in the agent's memory all the same
            self._log.error("failure_not_reported", error=str(report_error))
        return ReconcileReport(Outcome.FAILED, self._attempt, message, hold=hold)
