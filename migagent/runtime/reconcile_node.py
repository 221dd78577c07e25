"""One reconcile of the node: from the desired label to a reported state, undoing everything on failure.

    read node -> OBSERVE (layout file, NVML) -> PLAN -> nothing to do? report success, done.
    else: PLAN again with the pods per GI (fewest evicted) -> safety gate (runtime.gate): a change
          that needs pods gone that cannot be evicted is refused here, before any write to the Node
          -> pending -> CORDON -> PAUSE (device plugin) -> DRAIN (only pods on disturbed devices)
          -> APPLY (journaled engine) -> RESTART_PLUGIN -> READVERTISE -> UNCORDON -> success

Each phase that changes the node pushes its inverse on the attempt's undo stack; `_fail` is the one
place that unwinds it and reports `failed`. The stack starts with whatever an interrupted attempt
left on the Node (our cordon, paused labels), so a restarted agent finishes or undoes that too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import structlog

from migagent.kube.deviceplugin import PausedComponents, advertised_within, wait_for_advertisement
from migagent.kube.drain_scope import gi_workloads
from migagent.kube.expected import advertisement_matches, expected_resources
from migagent.kube.names import (
    ATTEMPT_ANNOTATION,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    ConditionReason,
    EventReason,
    MigConfigState,
)
from migagent.kube.port import NodeChangedError, NodeView, PodView
from migagent.kube.status import (
    StatusReporter,
    desired_annotation,
    observed_annotation,
    plan_annotation,
    reports_success,
)
from migagent.layout.desired import DesiredNode
from migagent.layout.observed import Observation
from migagent.layout.parse import load_layout_file
from migagent.layout.resolve import identity_of, resolve_config
from migagent.planning import Plan, plan
from migagent.reconcile.journal import desired_node_hash
from migagent.reconcile.machine import Planner
from migagent.reconcile.result import ApplyOutcome
from migagent.runtime.attempt import (
    DEVICE_PLUGIN,
    UNCORDON,
    ApplyFailedError,
    AttemptMarker,
    NodeReleases,
    StopRequested,
    UndoStack,
    failure_reason,
)
from migagent.runtime.gate import decide_drain
from migagent.runtime.listener import AgentPhase, Outcome
from migagent.runtime.notes import check_advertisable, eviction_reasons, gpu_pods_left_alone, plan_summary
from migagent.runtime.ports import AgentPorts, AgentSettings, PhaseHook, ReconcileReport
from migagent.runtime.post_change import HOST_CLIENTS_UNDO, ChangeContext
from migagent.runtime.preflight import Preflight
from migagent.runtime.supersede import CheckedNodeReads, LabelCheckpoint, LayoutSuperseded

log = structlog.get_logger(__name__)

_SUCCESS_WRITE_TRIES = 5


@dataclass(frozen=True)
class _Decided:
    """What the gate let through: the plan, the planner that made it (the engine re-plans with the
    same workloads per GI), and the pods to evict."""

    steps: Plan
    planner: Planner
    evict: tuple[PodView, ...]


class NodeReconcile:
    """One attempt; build a new one per reconcile (its undo stack is the attempt's own)."""

    def __init__(
        self,
        ports: AgentPorts,
        settings: AgentSettings,
        *,
        stop: threading.Event | None = None,
        phase_hook: PhaseHook | None = None,
        current_label: Callable[[], str | None] | None = None,
        heartbeat: Callable[[], None] | None = None,
    ) -> None:
        """`current_label`: the label value the watch saw last (a change mid-attempt supersedes it);
        `heartbeat`: beaten at every safe point, so liveness sees a long change progressing."""
        self._current_label = current_label
        self._heartbeat = heartbeat
        self._p = ports
        self._settings = settings
        self._stop = stop
        self._hook = phase_hook
        self._undo = UndoStack()
        self._change_context: ChangeContext | None = None  # what before_change stopped, for a re-plan
        self._status = StatusReporter(ports.api)
        self._releases = NodeReleases(ports.api, ports.restarter, self._status, self._undo)
        self._phase: AgentPhase | None = None
        self._attempt = 1
        self._log = log.bind(node=ports.api.node_name)

    def run(self) -> ReconcileReport:
        try:
            node = self._p.api.get_node()
        except Exception as exc:
            self._log.error("node_unreadable", error=str(exc))
            return ReconcileReport(Outcome.FAILED, self._attempt, f"reading the node: {exc}", node_read=False)
        try:
            return ReconcileReport(self._run(node), self._attempt)
        except StopRequested as stop:
            return self._stopped(stop)
        except Exception as exc:  # every failure, of any kind, is undone and reported in one place
            if self._stop is not None and self._stop.is_set():
                return self._stopped(exc)  # a wait the stop request cut short: undone, not a failure
            return self._fail(exc)

    # -- the flow -------------------------------------------------------------------------------

    def _run(self, node: NodeView) -> Outcome:
        self._adopt_leftovers(node)
        name = node.labels.get(MIG_CONFIG_LABEL)
        if name is None:
            self._finish_leftovers()
            self._log.info("no_desired_layout", label=MIG_CONFIG_LABEL)
            return Outcome.NO_DESIRED_LAYOUT
        self._log = self._log.bind(layout=name, attempt=self._attempt)
        preflight = self._p.preflight or Preflight(self._p.api)  # sole owner, strategy: before any write
        self._settings = preflight.check(node, self._settings, self._p.driver.observe)
        with self._in_phase(AgentPhase.OBSERVE):
            layout = load_layout_file(self._settings.config_file)  # re-read: the ConfigMap may have changed
            observation = self._p.driver.observe()
        with self._in_phase(AgentPhase.PLAN):
            desired = resolve_config(layout, name, [identity_of(gpu) for gpu in observation.gpus])
            check_advertisable(desired, observation, self._settings.mig_strategy)
            steps = plan(observation, desired)
        if steps.is_empty:
            advertising = self._advertising(node, observation)
            if advertising is not None:
                return self._already_applied(advertising, name, desired, observation)
            return self._reconfigure(name, desired, observation, _Decided(steps, plan, ()))
        with self._in_phase(AgentPhase.PLAN):
            decided = self._decide(desired, observation)
        return self._reconfigure(name, desired, observation, decided)

    def _decide(self, desired: DesiredNode, observation: Observation) -> _Decided:
        """Plan for the fewest evicted pods and run the safety gate, before anything on the Node changes."""
        pods = self._p.api.list_pods_on_node()
        holdings = self._p.pod_resources.list()
        workloads = gi_workloads(observation, holdings)

        def planner(seen: Observation, wanted: DesiredNode) -> Plan:
            return plan(seen, wanted, workloads=workloads)

        steps = planner(observation, desired)
        decision = decide_drain(
            self._p.api, steps, observation, holdings, pods,
            force_delete=self._settings.force_delete, gate=self._settings.gate,
        )
        return _Decided(steps, planner, decision.evict)

    def _advertising(self, node: NodeView, observation: Observation) -> NodeView | None:
        """The node once it advertises what the GPUs hold; None: the plugin needs a restart.

        A plugin only starting (node boot, pod recreated) gets the settle period before anything is
        cordoned or restarted; after an interrupted or failed attempt it is known to be behind."""
        expected = expected_resources(observation, strategy=self._settings.mig_strategy)
        if advertisement_matches(node.allocatable, expected)[0]:
            return node
        if self._undo.names or node.labels.get(MIG_CONFIG_STATE_LABEL) not in (None, MigConfigState.SUCCESS):
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

    def _already_applied(self, node: NodeView, name: str, desired: DesiredNode, observation: Observation) -> Outcome:
        self._finish_leftovers()
        wanted = desired_annotation(name, desired_node_hash(desired))
        reported = reports_success(node, wanted)
        if not reported:  # idle re-checks write nothing
            self._status.succeeded(
                desired=wanted, observed=observed_annotation(observation), message=f"layout {name} is applied"
            )
        self._log.info("layout_already_applied", reported=reported)
        return Outcome.UNCHANGED

    def _reconfigure(self, name: str, desired: DesiredNode, observation: Observation, decided: _Decided) -> Outcome:
        self._report_pending(name, desired, decided.steps)
        with self._in_phase(AgentPhase.CORDON):
            if self._releases.cordon.cordon():
                self._undo.push(UNCORDON, self._releases.uncordon)
                self._status.event(EventReason.CORDONED, f"node cordoned while layout {name} is applied")
        with self._in_phase(AgentPhase.PAUSE):
            paused = self._pause()
        while True:
            checkpoint = LabelCheckpoint(self._current_label, name, heartbeat=self._heartbeat)
            try:
                return self._change(name, desired, observation, decided, paused=paused, checkpoint=checkpoint)
            except LayoutSuperseded as newer:
                # One disruption per change: re-plan from what the GPUs hold now, keeping the cordon.
                self._log.info("layout_superseded", applying=name, now=newer.layout)
                self._status.event(
                    EventReason.RECONFIGURING, f"label changed to {newer.layout} while {name} was applied: re-planning"
                )
                name = newer.layout
                self._log = self._log.bind(layout=name)
                with self._in_phase(AgentPhase.OBSERVE):
                    layout = load_layout_file(self._settings.config_file)
                    observation = self._p.driver.observe()
                with self._in_phase(AgentPhase.PLAN):
                    desired = resolve_config(layout, name, [identity_of(gpu) for gpu in observation.gpus])
                    check_advertisable(desired, observation, self._settings.mig_strategy)
                    decided = self._decide(desired, observation)
                self._report_pending(name, desired, decided.steps)
                if DEVICE_PLUGIN not in self._undo:  # already resumed: pause again before the GPUs change
                    with self._in_phase(AgentPhase.PAUSE):
                        paused = self._pause()

    def _report_pending(self, name: str, desired: DesiredNode, steps: Plan) -> None:
        marker = AttemptMarker(self._attempt, name, self._p.clock.wall())
        self._status.pending(
            desired_annotation(name, desired_node_hash(desired)),
            f"applying layout {name}: {plan_summary(steps)}",
            attempt=marker.to_annotation(),
        )

    def _change(
        self,
        name: str,
        desired: DesiredNode,
        observation: Observation,
        decided: _Decided,
        *,
        paused: PausedComponents,
        checkpoint: LabelCheckpoint,
    ) -> Outcome:
        """Drain, apply, re-advertise, report; LayoutSuperseded from any safe point on the way."""
        steps = decided.steps
        layout_hash = desired_node_hash(desired)
        with self._in_phase(AgentPhase.DRAIN):
            self._drain(steps, observation, checkpoint)
        with self._in_phase(AgentPhase.APPLY):
            context = self._before_change()
            rebooting = self._apply(name, desired, layout_hash, decided, checkpoint)
        if rebooting:  # the node keeps its cordon and paused labels until the agent resumes after the reboot
            return Outcome.REBOOTING
        with self._in_phase(AgentPhase.RESTART_PLUGIN):
            self._after_change(context)
            self._restart_plugin(paused)
        with self._in_phase(AgentPhase.READVERTISE):
            after = self._readvertise(name, checkpoint)
        self._report_success(name, layout_hash, after, steps)
        with self._in_phase(AgentPhase.UNCORDON):
            if UNCORDON in self._undo:
                self._releases.uncordon()
                self._undo.pop(UNCORDON)
        self._p.listener.layout_applied(name)
        self._log.info("layout_applied")
        return Outcome.APPLIED

    def _report_success(self, name: str, layout_hash: str, after: Observation, steps: Plan) -> None:
        """`success`, only while the label still names `name`: a write conditional on the resourceVersion
        the label was read at, so a label changed in between is never reported as applied."""
        for _ in range(_SUCCESS_WRITE_TRIES):
            node = self._p.api.get_node()
            label = node.labels.get(MIG_CONFIG_LABEL)
            if label is not None and label != name:
                raise LayoutSuperseded(label)
            try:
                self._status.succeeded(
                    desired=desired_annotation(name, layout_hash),
                    observed=observed_annotation(after),
                    plan=plan_annotation(steps),
                    message=f"layout {name} applied: {plan_summary(steps)}",
                    resource_version=node.resource_version,
                )
                return
            except NodeChangedError:
                continue  # the Node moved on (a label, a kubelet update): read it again and decide afresh
        raise ApplyFailedError(f"layout {name} is applied but the node kept changing while success was recorded")

    def _pause(self) -> PausedComponents:
        adopted = DEVICE_PLUGIN in self._undo
        # Until pause() returns, a failure restores whatever it had paused on the Node by then.
        self._undo.push(DEVICE_PLUGIN, self._releases.resume_paused_labels)
        paused = self._p.restarter.pause()
        if paused.restore:
            self._undo.push(DEVICE_PLUGIN, lambda: self._p.restarter.resume(paused))
            self._status.event(EventReason.DEVICE_PLUGIN_PAUSED, f"paused {', '.join(sorted(paused.restore))}")
        elif not adopted:
            self._undo.pop(DEVICE_PLUGIN)  # nothing paused: nothing to restore until the GPUs change
        return paused

    def _drain(self, steps: Plan, observation: Observation, checkpoint: LabelCheckpoint) -> None:
        # Scoped again now the node is cordoned: a pod scheduled since the gate ran is seen (and gated).
        pods = self._p.api.list_pods_on_node()
        holdings = self._p.pod_resources.list()
        chosen = list(
            decide_drain(
                self._p.api, steps, observation, holdings, pods,
                force_delete=self._settings.force_delete, gate=self._settings.gate, processes=False,
            ).evict
        )
        left = gpu_pods_left_alone(pods, chosen)
        self._log.info("drain_scoped", evict=[str(p.ref) for p in chosen], left_alone=[str(r) for r in left])
        if not chosen:
            return
        reasons = eviction_reasons(chosen, holdings, observation, steps)
        self._status.progress(
            ConditionReason.DRAINING,
            f"evicting {len(chosen)} pod(s) on devices the change removes: {', '.join(str(p.ref) for p in chosen)};"
            f" {len(left)} other GPU pod(s) keep running",
        )
        result = self._p.drainer.drain(
            chosen,
            timeout_s=self._settings.drain_timeout_s,
            force_delete=self._settings.force_delete,
            stop=self._stop,
            checkpoint=checkpoint,
        )
        self._p.listener.pods_evicted(len(result.removed))
        self._p.listener.drain_wait(result.waited_s)
        for ref in result.removed:
            self._status.event(EventReason.POD_EVICTED, f"pod {ref} evicted: {reasons.get(ref, 'holds a device')}")

    def _apply(
        self, name: str, desired: DesiredNode, layout_hash: str, decided: _Decided, checkpoint: LabelCheckpoint
    ) -> bool:
        """Run the engine; True when it asked for a reboot to activate a MIG mode change."""
        steps = decided.steps
        # From here on the GPUs may change: any failure must let the device plugin re-enumerate.
        if DEVICE_PLUGIN not in self._undo:
            self._undo.push(DEVICE_PLUGIN, lambda: self._p.restarter.resume(PausedComponents()))
        result = self._p.engine.apply(
            desired, layout_hash=layout_hash, config_name=name, planner=decided.planner, checkpoint=checkpoint
        )
        self._p.listener.instances_changed(
            sum(len(g.keep) for g in steps.gpus),
            sum(len(g.destroy) for g in steps.gpus),
            sum(len(g.create) for g in steps.gpus),
        )
        self._p.listener.gpus_reset(sum(1 for g in steps.gpus if g.reset))
        if result.outcome is ApplyOutcome.REBOOT_REQUESTED:
            self._status.rebooting(f"layout {name}: {result.error or 'a reboot activates the MIG mode change'}")
            return True
        if result.outcome is not ApplyOutcome.CONVERGED:
            raise ApplyFailedError(result.error or f"apply ended {result.outcome.value}")
        self._status.event(EventReason.GPUS_RECONFIGURED, f"GPUs now hold layout {name}: {plan_summary(steps)}")
        return False

    def _before_change(self) -> ChangeContext:
        """Operator validators and host GPU clients let go of the GPUs (runtime.post_change).

        Once per change: a layout superseded after this (re-planned in the same attempt) keeps the
        host clients stopped and reuses what was stopped, so they are started again exactly once."""
        steps = self._p.post_change
        if steps is None:
            return ChangeContext()
        if self._change_context is not None and HOST_CLIENTS_UNDO in self._undo:
            return self._change_context
        context = steps.before_change()
        if context.stopped_units:
            self._undo.push(HOST_CLIENTS_UNDO, lambda: steps.restart_host_clients(context))
        self._change_context = context
        return context

    def _after_change(self, context: ChangeContext) -> None:
        """CDI spec, host GPU clients, validator restart: what the operator needs to see the new devices."""
        if self._p.post_change is not None:
            self._p.post_change.after_change(context)
            self._undo.pop(HOST_CLIENTS_UNDO)

    def _restart_plugin(self, paused: PausedComponents) -> None:
        self._p.restarter.resume(paused)
        self._undo.pop(DEVICE_PLUGIN)  # only once resumed: a failed resume is retried by the undo
        self._status.event(EventReason.DEVICE_PLUGIN_RESTARTED, "device plugin restarted to re-enumerate MIG devices")

    def _readvertise(self, name: str, checkpoint: LabelCheckpoint) -> Observation:
        after = self._p.driver.observe()
        expected = expected_resources(after, strategy=self._settings.mig_strategy)
        self._status.progress(
            ConditionReason.WAITING_FOR_DEVICE_PLUGIN,
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

    def _adopt_leftovers(self, node: NodeView) -> None:
        """Take over what an interrupted attempt left on the Node, so this attempt ends it either way."""
        previous = AttemptMarker.from_annotation(node.annotations.get(ATTEMPT_ANNOTATION))
        self._attempt = previous.number + 1 if previous is not None else 1
        leftovers = self._releases.adopt(node)
        if leftovers:
            self._log.warning("interrupted_attempt_found", leftovers=leftovers, previous_attempt=previous)

    def _finish_leftovers(self) -> None:
        failures = self._undo.unwind()
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
        self._log.info("attempt_stopped", phase=self._phase, undo=self._undo.names, why=str(why))
        self._undo.unwind()
        return ReconcileReport(Outcome.STOPPED, self._attempt)

    def _fail(self, error: Exception) -> ReconcileReport:
        """The one place an attempt fails: undo in reverse order, then report failed with the reason."""
        phase = self._phase.value if self._phase is not None else "start"
        undo_started = self._p.clock.monotonic()
        undo_failures = self._undo.unwind()
        self._p.listener.phase_finished(AgentPhase.UNDO, self._p.clock.monotonic() - undo_started)
        message = f"{phase}: {error}"
        if undo_failures:
            message += f" (undo incomplete, retried next attempt: {'; '.join(undo_failures)})"
        reason = failure_reason(error)
        self._log.error("attempt_failed", phase=phase, reason=str(reason), error=str(error))
        try:
            self._status.failed(reason, message, attempt=self._attempt)
        except Exception as report_error:
            self._log.error("failure_not_reported", error=str(report_error))
        return ReconcileReport(Outcome.FAILED, self._attempt, message)
