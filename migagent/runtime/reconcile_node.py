"""One reconcile of the node: from the desired label to a reported state, undoing everything on failure.

    read node -> held by a failed attempt's back-off and nothing it depends on changed? done.
    -> OBSERVE (layout file, NVML) -> PLAN -> nothing to do? report success, done.
    else: PLAN again with the pods per GI (fewest evicted) -> safety gate (runtime.gate): a change
          that needs pods gone that cannot be evicted is refused here, before any write to the Node
          -> pending -> CORDON -> PAUSE (device plugin) -> DRAIN (only pods on disturbed devices)
          -> APPLY (journaled engine) -> RESTART_PLUGIN -> READVERTISE -> success -> UNCORDON
    a label changed at a safe point of DRAIN..READVERTISE: back to OBSERVE, keeping the window open.

Every disturbance of the node and its undo belongs to the attempt's `ChangeWindow`
(runtime.change_window); `_fail` is the one place that unwinds it and reports `failed`. The window
starts with whatever an interrupted attempt left on the Node, so a restarted agent finishes or
undoes that too. Status writes are runtime.node_report's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import structlog

from migagent.errors import InvalidLayoutError
from migagent.kube.deviceplugin import advertised_within, wait_for_advertisement
from migagent.kube.drain_scope import gi_workloads
from migagent.kube.expected import NotAdvertisableError, advertisement_matches, expected_resources
from migagent.kube.names import (
    ATTEMPT_ANNOTATION,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    NEXT_RETRY_ANNOTATION,
    MigConfigState,
)
from migagent.kube.names import ConditionReason as Reason
from migagent.kube.names import EventReason as Event
from migagent.kube.port import NodeView, PodView
from migagent.kube.status import StatusReporter
from migagent.layout.desired import DesiredNode
from migagent.layout.observed import Observation
from migagent.layout.parse import load_layout_file, parse_layout
from migagent.layout.resolve import identity_of, resolve_config
from migagent.planning import Plan, plan
from migagent.reconcile.journal import desired_node_hash
from migagent.reconcile.machine import Planner
from migagent.reconcile.result import ApplyOutcome
from migagent.runtime.attempt import ApplyFailedError, AttemptMarker, StopRequested, failure_reason
from migagent.runtime.backoff import RetryHold, depends_on
from migagent.runtime.change_window import ChangeWindow
from migagent.runtime.gate import decide_drain
from migagent.runtime.node_report import NodeReport
from migagent.runtime.notes import check_advertisable, eviction_reasons, gpu_pods_left_alone, plan_summary
from migagent.runtime.phases import AgentPhase, Outcome
from migagent.runtime.ports import AgentPorts, AgentSettings, PhaseHook, ReconcileReport
from migagent.runtime.supersede import CheckedNodeReads, LabelCheckpoint, LayoutSuperseded

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class _Target:
    """A layout resolved against what the GPUs hold now, and what the gate let through for it."""

    name: str
    desired: DesiredNode
    observation: Observation
    steps: Plan
    planner: Planner
    evict: tuple[PodView, ...] = ()


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
    ) -> None:
        """`current_label`: the label value the watch saw last (a change mid-attempt supersedes it);
        `heartbeat`: beaten at every safe point, so liveness sees a long change progressing;
        `hold`: the last failure's back-off as the agent remembers it (else the Node's annotation)."""
        self._current_label = current_label
        self._hold = hold
        self._depends: str | None = None
        self._heartbeat = heartbeat
        self._p = ports
        self._settings = settings
        self._stop = stop
        self._hook = phase_hook
        self._status = StatusReporter(ports.api)
        self._report = NodeReport(ports.api, self._status, clock=ports.clock)
        self._window = ChangeWindow(
            ports.api, ports.restarter, self._status, clock=ports.clock, post_change=ports.post_change
        )
        self._phase: AgentPhase | None = None
        self._attempt = 1
        self._layout: str | None = None
        self._node: NodeView | None = None
        self._log = log.bind(node=ports.api.node_name)

    def run(self) -> ReconcileReport:
        try:
            node = self._p.api.get_node()
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
        if not leftovers and self._held(node, name):
            return Outcome.HELD
        target = self._observe_and_resolve(name)
        if target.steps.is_empty:
            advertising = self._advertising(node, target.observation)
            if advertising is not None:
                self._finish_leftovers()
                reported = self._report.already_applied(advertising, name, target.desired, target.observation)
                self._log.info("layout_already_applied", reported=reported)
                return Outcome.UNCHANGED
        else:
            with self._in_phase(AgentPhase.PLAN):
                target = self._decide(target)
        return self._reconfigure(target)

    def _observe_and_resolve(self, name: str) -> _Target:
        self._layout = name
        self._log = self._log.bind(layout=name, attempt=self._attempt)
        with self._in_phase(AgentPhase.OBSERVE):
            layout = load_layout_file(self._settings.config_file)  # re-read: the ConfigMap may have changed
            observation = self._p.driver.observe()
        with self._in_phase(AgentPhase.PLAN):
            desired = resolve_config(layout, name, [identity_of(gpu) for gpu in observation.gpus])
            check_advertisable(desired, observation, self._settings.mig_strategy)
            return _Target(name, desired, observation, plan(observation, desired), plan)

    def _decide(self, target: _Target) -> _Target:
        """Plan for the fewest evicted pods and run the safety gate, before anything on the Node changes."""
        pods = self._p.api.list_pods_on_node()
        holdings = self._p.pod_resources.list()
        workloads = gi_workloads(target.observation, holdings)

        def planner(seen: Observation, wanted: DesiredNode) -> Plan:
            return plan(seen, wanted, workloads=workloads)

        steps = planner(target.observation, target.desired)
        decision = decide_drain(
            self._p.api, steps, target.observation, holdings, pods, force_delete=self._settings.force_delete
        )
        return _Target(target.name, target.desired, target.observation, steps, planner, decision.evict)

    def _advertising(self, node: NodeView, observation: Observation) -> NodeView | None:
        """The node once it advertises what the GPUs hold; None: the plugin needs a restart.

        A plugin only starting (node boot, pod recreated) gets the settle period before anything is
        cordoned or restarted; after an interrupted or failed attempt it is known to be behind."""
        expected = expected_resources(observation, strategy=self._settings.mig_strategy)
        if advertisement_matches(node.allocatable, expected)[0]:
            return node
        if self._window.open or node.labels.get(MIG_CONFIG_STATE_LABEL) not in (None, MigConfigState.SUCCESS):
            return None
        self._log.info("waiting_for_device_plugin_to_settle", settle_s=self._settings.plugin_settle_s)
        settled = advertised_within(
            self._p.api,
            expected,
            timeout_s=self._settings.plugin_settle_s,
            clock=self._p.clock,
            poll_interval_s=self._settings.readvertise_poll_s,
            stop=self._stop,
        )
        if self._stop is not None and self._stop.is_set():
            raise StopRequested("stop requested while waiting for the device plugin to settle")
        return settled

    def _reconfigure(self, target: _Target) -> Outcome:
        self._depends = self._digest(target.name)  # before the first write: the state a failure's back-off is held on
        self._report.pending(target.name, target.desired, target.steps, attempt=self._attempt)
        with self._in_phase(AgentPhase.CORDON):
            self._window.cordon(target.name)
        with self._in_phase(AgentPhase.PAUSE):
            self._window.pause()
        while True:
            checkpoint = LabelCheckpoint(self._current_label, target.name, heartbeat=self._heartbeat)
            try:
                return self._change(target, checkpoint)
            except LayoutSuperseded as newer:
                # One disruption per change: re-plan from what the GPUs hold now, keeping the window open.
                self._log.info("layout_superseded", applying=target.name, now=newer.layout)
                self._status.event(
                    Event.RECONFIGURING, f"label changed to {newer.layout} while {target.name} was applied: re-planning"
                )
                target = self._observe_and_resolve(newer.layout)
                with self._in_phase(AgentPhase.PLAN):
                    target = self._decide(target)
                self._report.pending(target.name, target.desired, target.steps, attempt=self._attempt)
                with self._in_phase(AgentPhase.PAUSE):
                    self._window.pause_again()

    def _change(self, target: _Target, checkpoint: LabelCheckpoint) -> Outcome:
        """Drain, apply, re-advertise, report; LayoutSuperseded from any safe point on the way."""
        with self._in_phase(AgentPhase.DRAIN):
            self._drain(target, checkpoint)
        with self._in_phase(AgentPhase.APPLY):
            self._window.gpus_may_change()
            self._window.before_change()
            if self._apply(target, checkpoint):
                return Outcome.REBOOTING  # cordon and paused labels stay until the agent resumes after the reboot
        with self._in_phase(AgentPhase.RESTART_PLUGIN):
            self._window.after_change()
            self._window.resume_plugin()
        with self._in_phase(AgentPhase.READVERTISE):
            after = self._readvertise(target.name, checkpoint)
        self._report.success(target.name, target.desired, after, target.steps)
        with self._in_phase(AgentPhase.UNCORDON):
            self._window.uncordon()
        self._p.listener.layout_applied(target.name)
        self._log.info("layout_applied")
        return Outcome.APPLIED

    def _drain(self, target: _Target, checkpoint: LabelCheckpoint) -> None:
        # Scoped again now the node is cordoned: a pod scheduled since the gate ran is seen (and gated).
        pods = self._p.api.list_pods_on_node()
        holdings = self._p.pod_resources.list()
        chosen = decide_drain(
            self._p.api, target.steps, target.observation, holdings, pods, force_delete=self._settings.force_delete
        ).evict
        left = gpu_pods_left_alone(pods, chosen)
        self._log.info("drain_scoped", evict=[str(p.ref) for p in chosen], left_alone=[str(r) for r in left])
        if not chosen:
            return
        reasons = eviction_reasons(chosen, holdings, target.observation, target.steps)
        self._status.progress(
            Reason.DRAINING,
            f"evicting {len(chosen)} pod(s) on devices the change removes: {', '.join(str(p.ref) for p in chosen)};"
            f" {len(left)} other GPU pod(s) keep running",
        )
        result = self._p.drainer.drain(
            list(chosen),
            timeout_s=self._settings.drain_timeout_s,
            force_delete=self._settings.force_delete,
            stop=self._stop,
            checkpoint=checkpoint,
        )
        self._p.listener.pods_evicted(len(result.removed))
        self._p.listener.drain_wait(result.waited_s)
        for ref in result.removed:
            self._status.event(Event.POD_EVICTED, f"pod {ref} evicted: {reasons.get(ref, 'holds a device')}")

    def _apply(self, target: _Target, checkpoint: LabelCheckpoint) -> bool:
        """Run the engine; True when it asked for a reboot to activate a MIG mode change."""
        name, steps = target.name, target.steps
        result = self._p.engine.apply(
            target.desired,
            layout_hash=desired_node_hash(target.desired),
            config_name=name,
            planner=target.planner,
            checkpoint=checkpoint,
        )
        kept, destroyed, created = (sum(len(getattr(g, k)) for g in steps.gpus) for k in ("keep", "destroy", "create"))
        self._p.listener.instances_changed(kept, destroyed, created)
        self._p.listener.gpus_reset(sum(1 for g in steps.gpus if g.reset))
        if result.outcome is ApplyOutcome.REBOOT_REQUESTED:
            self._status.rebooting(f"layout {name}: {result.error or 'a reboot activates the MIG mode change'}")
            return True
        if result.outcome is not ApplyOutcome.CONVERGED:
            raise ApplyFailedError(result.error or f"apply ended {result.outcome.value}")
        self._status.event(Event.GPUS_RECONFIGURED, f"GPUs now hold layout {name}: {plan_summary(steps)}")
        return False

    def _readvertise(self, name: str, checkpoint: LabelCheckpoint) -> Observation:
        after = self._p.driver.observe()
        expected = expected_resources(after, strategy=self._settings.mig_strategy)
        self._status.progress(
            Reason.WAITING_FOR_DEVICE_PLUGIN,
            f"layout {name} is on the GPUs; waiting for the device plugin to advertise {len(expected)} resource(s)",
        )
        started = self._p.clock.monotonic()
        wait_for_advertisement(
            CheckedNodeReads(self._p.api, checkpoint),
            expected,
            timeout_s=self._settings.readvertise_timeout_s,
            clock=self._p.clock,
            poll_interval_s=self._settings.readvertise_poll_s,
            stop=self._stop,
        )
        self._p.listener.readvertise_wait(self._p.clock.monotonic() - started)
        return after

    # -- leftovers, phases, failure ---------------------------------------------------------------

    def _adopt(self, node: NodeView) -> tuple[str, ...]:
        """Take over what an interrupted attempt left on the Node, so this attempt ends it either way."""
        self._node = node
        self._hold = self._hold or RetryHold.from_annotation(node.annotations.get(NEXT_RETRY_ANNOTATION))
        previous = AttemptMarker.from_annotation(node.annotations.get(ATTEMPT_ANNOTATION))
        # Counted on the Node, and in memory too: a node refusing status writes still backs off further.
        remembered = self._hold.failures if self._hold is not None else 0
        self._attempt = max(previous.number if previous is not None else 0, remembered) + 1
        leftovers = self._window.adopt(node)
        if leftovers:
            self._log.warning("interrupted_attempt_found", leftovers=leftovers, previous_attempt=previous)
        return leftovers

    def _held(self, node: NodeView, name: str) -> bool:
        """True while the last failure's retry time has not come and nothing it depended on changed."""
        hold = self._hold
        if hold is None or hold.due(now=self._p.clock.wall(), label=name):
            return False
        try:
            changed = hold.depends is not None and self._digest(name) != hold.depends
        except Exception as exc:  # what cannot be read now would fail the attempt too: keep holding
            self._log.info("held_dependencies_unreadable", error=str(exc))
            changed = False
        if changed:
            self._log.info("back_off_lifted", reason="something the failed attempt depended on changed")
            return False
        self._log.info("held_by_back_off", layout=name, retry_in_s=round(hold.at - self._p.clock.wall(), 3))
        return True

    def _digest(self, name: str) -> str:
        """What an attempt's outcome depends on, now (runtime.backoff.depends_on). The pods count only
        for a layout that resolves: a refused layout is not asked about who uses the GPUs."""
        path = self._settings.config_file
        try:
            layout_text = path.read_bytes()
        except OSError:
            layout_text = b""
        observation = self._p.driver.observe()
        try:
            layout = parse_layout(layout_text.decode("utf-8", "replace"), source=str(path))
            check_advertisable(
                resolve_config(layout, name, [identity_of(gpu) for gpu in observation.gpus]),
                observation,
                self._settings.mig_strategy,
            )
            pods = self._p.api.list_pods_on_node()
        except (InvalidLayoutError, NotAdvertisableError):
            pods = []
        return depends_on(
            layout_text=layout_text,
            observation=observation,
            gpu_pods=pods,
            allocatable=self._node.allocatable if self._node is not None else {},
        )

    def _finish_leftovers(self) -> None:
        failures = self._window.unwind()
        if failures:
            raise ApplyFailedError(f"could not undo an interrupted attempt: {'; '.join(failures)}")

    @contextmanager
    def _in_phase(self, phase: AgentPhase) -> Iterator[None]:
        if self._stop is not None and self._stop.is_set():
            raise StopRequested(f"stop requested before {phase.value}")
        self._phase = phase
        if self._hook is not None:
            self._hook(phase)
        started = self._p.clock.monotonic()
        try:
            yield
        finally:
            self._p.listener.phase_finished(phase, self._p.clock.monotonic() - started)

    def _stopped(self, why: Exception) -> ReconcileReport:
        self._log.info("attempt_stopped", phase=self._phase, open=self._window.open, why=str(why))
        self._window.unwind()
        return ReconcileReport(Outcome.STOPPED, self._attempt)

    def _fail(self, error: Exception) -> ReconcileReport:
        """The one place an attempt fails: undo in reverse order, then report failed with the reason."""
        phase = self._phase.value if self._phase is not None else "start"
        undo_started = self._p.clock.monotonic()
        undo_failures = self._window.unwind()
        self._p.listener.phase_finished(AgentPhase.UNDO, self._p.clock.monotonic() - undo_started)
        message = f"{phase}: {error}"
        if undo_failures:
            message += f" (undo incomplete, retried next attempt: {'; '.join(undo_failures)})"
        reason = failure_reason(error)
        hold = self._retry_hold()
        self._log.error("attempt_failed", phase=phase, reason=str(reason), error=str(error), retry_at=hold.at)
        try:
            self._status.failed(reason, message, attempt=self._attempt, next_retry=hold.to_annotation())
        except Exception as report_error:  # held in the agent's memory all the same
            self._log.error("failure_not_reported", error=str(report_error))
        return ReconcileReport(Outcome.FAILED, self._attempt, message, hold=hold)

    def _retry_hold(self) -> RetryHold:
        depends = self._depends
        if depends is None and not self._window.gpus_touched:
            try:  # failed before disturbing anything: the node is as the attempt found it
                depends = None if self._layout is None else self._digest(self._layout)
            except Exception:
                depends = None
        delay = self._settings.retry.failure_delay(self._attempt)
        return RetryHold(self._p.clock.wall() + delay, self._layout, depends, failures=self._attempt)
