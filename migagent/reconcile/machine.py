"""The apply engine: observe, plan, gate, then run the plan one journaled, verified step at a time.

Crash safety comes from three rules. The journal records "about to run step i" before step i
touches a GPU and "step i done" after a fresh observation confirms it. Every step is checked
against a fresh observation before it runs, so a step that already happened is skipped. A journal
from another boot, or a node that no longer looks the way the plan expects at the current step,
leads to a fresh observation and a new plan rather than to blind replay.

Phases move only through `states.transition`, and only `_fail` moves an attempt to FAILED.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from migagent.clock import Clock
from migagent.errors import (
    InsufficientResourcesError,
    MigAgentError,
    NotSupportedError,
    PermanentError,
    ResetRequiredError,
    StorageError,
    TransientError,
)
from migagent.layout.desired import DesiredNode
from migagent.layout.observed import Observation
from migagent.planning import Plan, plan
from migagent.planning.naming import step_text
from migagent.planning.steps import Step, StepKind
from migagent.reconcile.bootid import BootIdProvider, read_boot_id
from migagent.reconcile.executor import (
    execute_step,
    journal_position_mismatch,
    lost_kept_instance,
    precondition_failure,
)
from migagent.reconcile.journal import JOURNAL_VERSION, Journal, JournalRecord
from migagent.reconcile.ports import GroupReset, NodeDriver, RebootRequester, unit_of_work
from migagent.reconcile.result import ApplyOutcome, ApplyResult
from migagent.reconcile.retry import RetryPolicy, step_retrying
from migagent.reconcile.safety import check_nothing_in_use
from migagent.reconcile.settle import destroy_bare_instances, made_by
from migagent.reconcile.signals import RebootNeeded, Replan, ResetSkipped
from migagent.reconcile.states import RESUMABLE, Phase, transition
from migagent.reconcile.where_stopped import GpuState, observe_where_stopped, with_gpu_state

Planner = Callable[[Observation, DesiredNode], Plan]

__all__ = ["ApplyEngine", "ApplyOutcome", "ApplyResult", "Planned", "Planner"]

log = structlog.get_logger(__name__)


def _needs_reboot(step: Step, error: MigAgentError) -> bool:
    """A reset the platform refuses, or a mode change only a reboot activates (pass-through VMs)."""
    if isinstance(error, ResetRequiredError):
        return step.kind in (StepKind.SET_MODE, StepKind.RESET_GPU)
    return step.kind is StepKind.RESET_GPU and isinstance(error, NotSupportedError)


_DEFAULT_PLANNER: Planner = plan


@dataclass(frozen=True)
class Planned:
    """A plan the caller already made and the observation it made it on: the engine runs it as it is
    while the GPUs still hold the same instances, and plans again only when they changed."""

    plan: Plan
    observation: Observation


@dataclass
class _Attempt:
    """The working state of one `apply` call (mutable on purpose: it is the engine's scratchpad)."""

    layout_hash: str
    config_name: str
    phase: Phase = Phase.IDLE
    boot_id: str = ""
    previous: JournalRecord | None = None
    plan: Plan | None = None
    step_index: int = 0
    attempts: int = 0
    reboot_requested: bool = False
    replanned: bool = False
    saved: JournalRecord | None = None
    steps_run: list[Step] = field(default_factory=list)
    steps_skipped: list[Step] = field(default_factory=list)
    log: Any = None
    started_s: float = 0.0  # the clock's monotonic time when `apply` began, for the summary's seconds
    planner: Planner = _DEFAULT_PLANNER  # `plan` the function; the field `plan` above shadows it here
    checkpoint: Callable[[], None] | None = None
    planned: Planned | None = None
    before: Observation | None = None
    """The node as this call first observed it: what a refused write's message compares against."""

    def result(self, outcome: ApplyOutcome, error: str | None = None) -> ApplyResult:
        return ApplyResult(outcome, tuple(self.steps_run), tuple(self.steps_skipped), error, self.plan)


class ApplyEngine:
    """Makes the node match a DesiredNode; safe to kill at any point and run again."""

    def __init__(
        self,
        driver: NodeDriver,
        journal: Journal,
        *,
        clock: Clock,
        boot_id_provider: BootIdProvider = read_boot_id,
        allow_reboot: bool = False,
        reboot_requester: RebootRequester | None = None,
        retry: RetryPolicy | None = None,
        skip_reset: bool = False,
        planner: Planner = plan,
    ) -> None:
        self._driver = driver
        self._journal = journal
        self._clock = clock
        self._boot_id = boot_id_provider
        self._allow_reboot = allow_reboot
        self._reboot_requester = reboot_requester
        self._retry = retry or RetryPolicy()
        self._skip_reset = skip_reset
        self._planner = planner

    def journal_unsettled(self) -> bool:
        """Whether the journal holds an attempt that did not end converged or idle (applying, failed,
        reboot-requested): an apply that finds nothing left to do runs anyway, to record convergence."""
        record = self._journal.load()
        return record is not None and record.phase not in (Phase.CONVERGED, Phase.IDLE)

    def check_storage(self, plan: Plan | None) -> None:
        """Raise StorageError unless the journal can hold an attempt at `plan` now (called before
        anything on the node is disturbed, so a full or read-only disk fails the attempt cleanly)."""
        self._journal.check_writable(plan)

    def apply(
        self,
        desired: DesiredNode,
        *,
        layout_hash: str,
        config_name: str,
        planner: Planner | None = None,
        checkpoint: Callable[[], None] | None = None,
        planned: Planned | None = None,
        part_of: DesiredNode | None = None,
    ) -> ApplyResult:
        """`planner` replaces the engine's for this call: the agent passes the one it drained for (the
        same workloads per GI), so the engine destroys exactly the GIs the drain emptied. `planned`: the
        plan that planner made before the drain; used as it is unless the GPUs changed since. `part_of`:
        the whole layout when `desired` is its MIG-mode part (a refused write says where the GPUs stand).

        `checkpoint` runs between two steps (never inside one, and after the journal says where the
        apply stands); whatever it raises, other than a MigAgentError, ends the apply there, resumable."""
        attempt = _Attempt(
            layout_hash=layout_hash,
            config_name=config_name,
            planner=planner or self._planner,
            checkpoint=checkpoint,
            planned=planned,
        )
        attempt.log = log.bind(config=config_name, layout_hash=layout_hash[:12])
        attempt.started_s = self._clock.monotonic()
        # NVML is held for the apply only (its steps share one init), never while the agent idles.
        with unit_of_work(self._driver):
            try:
                return self._run(attempt, desired)
            except StorageError as exc:
                return self._fail(attempt, with_gpu_state(exc, self._where_stopped(attempt, part_of or desired)))
            except MigAgentError as exc:
                return self._fail(attempt, exc)

    def _where_stopped(self, a: _Attempt, desired: DesiredNode) -> GpuState:
        return observe_where_stopped(
            self._driver, lambda now: a.planner(now, desired).is_empty, before=a.before, config_name=a.config_name,
            plan=a.plan, steps_done=a.step_index, log=a.log,
        )

    def settle(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """An abandoned change: no GPU instance it made (its journal says which) is left without compute
        instances; returns those destroyed and the bare ones left, not its own (reconcile.settle)."""
        record = self._journal.load()
        return destroy_bare_instances(self._driver, made_by(record.plan, record.step_index) if record else frozenset())

    # -- the flow -----------------------------------------------------------------------------

    def _run(self, a: _Attempt, desired: DesiredNode) -> ApplyResult:
        self._move(a, Phase.OBSERVING)
        self._load_journal(a)
        observation = a.before = self._driver.observe()
        self._check_reboot_outcome(a, observation, desired)
        if self._can_resume(a, observation):
            self._move(a, Phase.APPLYING)
            check_nothing_in_use(self._remaining(a), observation)
        else:
            self._plan(a, observation, desired)
        try:
            self._execute_with_one_replan(a, desired)
        except RebootNeeded as signal:
            return self._request_reboot(a, signal.reason)
        except ResetSkipped as signal:
            return self._stop_before_reset(a, signal.step)
        return self._converged(a)

    def _load_journal(self, a: _Attempt) -> None:
        a.boot_id = self._boot_id()
        previous = a.saved = self._journal.load()
        if previous is not None and previous.layout_hash == a.layout_hash:
            a.previous = previous
            a.attempts = previous.attempts
            a.reboot_requested = previous.reboot_requested

    def _can_resume(self, a: _Attempt, observation: Observation) -> bool:
        p = a.previous
        if p is None or p.plan is None or p.phase not in RESUMABLE or p.boot_id != a.boot_id:
            return False
        lost = lost_kept_instance(p.plan, observation)
        if lost is not None:
            # The rest of the journaled plan was chosen around GIs that are gone: plan afresh.
            a.log.warning("journal_stale", reason=lost)
            return False
        moved = journal_position_mismatch(p.plan, p.step_index, observation)
        if moved is not None:
            # The node is behind (or beside) the journal: plan afresh from what is there, in this run.
            a.log.warning("journal_disagrees_with_node", reason=moved, step_index=p.step_index)
            return False
        a.plan, a.step_index = p.plan, p.step_index
        a.log.info("journal_resumed", step_index=p.step_index, steps=len(p.plan.steps))
        return True

    def _plan(self, a: _Attempt, observation: Observation, desired: DesiredNode) -> None:
        self._move(a, Phase.PLANNING)
        planned, a.planned = a.planned, None  # only the first plan of an apply may be the caller's
        if planned is not None and planned.observation.same_instances(observation):
            a.plan, a.step_index = planned.plan, 0
            a.log.info("plan_reused", steps=len(a.plan.steps))
        else:
            a.plan, a.step_index = a.planner(observation, desired), 0
            a.log.info("plan_computed", steps=len(a.plan.steps))
        check_nothing_in_use(a.plan.steps, observation)
        self._move(a, Phase.APPLYING)

    def _execute_with_one_replan(self, a: _Attempt, desired: DesiredNode) -> None:
        while True:
            try:
                self._execute(a)
                self._check_converged(a, desired)
                return
            except Replan as signal:
                if a.replanned:
                    raise PermanentError(f"{signal.reason} (the node changed again after re-planning)") from signal
                a.log.warning("replanning", reason=signal.reason)
                a.replanned = True
                self._move(a, Phase.OBSERVING)
                self._plan(a, self._driver.observe(), desired)

    def _check_converged(self, a: _Attempt, desired: DesiredNode) -> None:
        """Every step is done; a fresh plan still having steps means the node changed under us."""
        self._move(a, Phase.VERIFYING)
        remaining = a.planner(self._driver.observe(), desired)
        if not remaining.is_empty:
            pending = "; ".join(step.describe() for step in remaining.steps[:4])
            raise Replan(f"the node does not match the layout after applying; still needed: {pending}")

    def _execute(self, a: _Attempt) -> None:
        assert a.plan is not None
        for index in range(a.step_index, len(a.plan.steps)):
            a.step_index = index
            self._save(a, Phase.APPLYING)  # write-ahead: "about to run step `index`"
            self._run_step_retrying(a, a.plan.steps[index])
            a.step_index = index + 1
            self._save(a, Phase.APPLYING)

    def _run_step_retrying(self, a: _Attempt, step: Step) -> None:
        retrying = step_retrying(self._retry, clock=self._clock, what=step.describe())
        try:
            for try_ in retrying:
                with try_:
                    ran = self._run_step(a, step)
        except TransientError as exc:
            raise PermanentError(
                f"{step.describe()}: still failing after {self._retry.step_attempts} attempts: {exc}"
            ) from exc
        (a.steps_run if ran else a.steps_skipped).append(step)

    def _run_step(self, a: _Attempt, step: Step) -> bool:
        observation = self._observe_step_gpu(step)
        # Named as a person reads it (`GPU 3: destroy 1g.10gb at slot 2`); errors keep NVML's ids.
        step_log = a.log.bind(gpu=step.gpu, step=step_text(step, observation.gpu(step.gpu).profiles))
        if step.is_done(observation):
            step_log.info("step_skipped", reason="already done")
            return False
        if a.checkpoint is not None:
            # A safe point: the previous step is done and journaled, this one not begun. Only before a step
            # that calls NVML: a stop with nothing left to call (a reset done with another) lets it converge.
            a.checkpoint()
        reason = precondition_failure(step, observation)
        if reason is not None:
            raise Replan(reason)
        if step.kind is StepKind.RESET_GPU and self._skip_reset:
            raise ResetSkipped(step)
        step_log.info("step_started")  # step_started/succeeded/failed are the CLI's progress lines too
        started = self._clock.monotonic()
        try:
            together = self._reset_group(a, step)
            if len(together) > 1 and isinstance(self._driver, GroupReset):
                step_log.info("gpus_reset_together", gpus=list(together))
                self._driver.reset_gpus(together)
                if not step.is_done(self._observe_step_gpu(step)):
                    raise PermanentError(f"{step.describe()}: the reset reported success but the node does not show it")
            else:
                self._execute_step(step, observation)
        except (MigAgentError, Replan, RebootNeeded) as exc:  # every started step gets an end line
            step_log.warning("step_failed", seconds=round(self._clock.monotonic() - started, 3), error=str(exc))
            if step.kind is StepKind.CREATE_CI and isinstance(exc, PermanentError):
                self._destroy_gis_left_without_cis(a, step.gpu)
            raise
        step_log.info("step_succeeded", seconds=round(self._clock.monotonic() - started, 3))
        return True

    def _reset_group(self, a: _Attempt, step: Step) -> tuple[int, ...]:
        """The GPUs this reset step resets: with it, every later reset step of the plan not yet done,
        in one `nvidia-smi -r -i A,B,...` as mig-parted does (NVLink peers must reset together)."""
        if step.kind is not StepKind.RESET_GPU or self._skip_reset or a.plan is None:
            return (step.gpu,)
        later = [s for s in a.plan.steps[a.step_index + 1 :] if s.kind is StepKind.RESET_GPU]
        pending = [s.gpu for s in later if not s.is_done(self._observe_step_gpu(s))]
        return (step.gpu, *pending)

    def _destroy_gis_left_without_cis(self, a: _Attempt, gpu: int) -> None:
        """A CI NVML refused ends the apply: the GIs this plan created on the GPU and that still have
        no CI are destroyed with it, so no path leaves a GI without CIs (the next attempt plans anew)."""
        assert a.plan is not None
        created = {s.gi_placement for s in a.plan.steps if s.kind is StepKind.CREATE_GI and s.gpu == gpu}
        for gi in self._driver.observe_gpu(gpu).gpu_instances:
            if gi.placement in created and not gi.compute_instances:
                try:
                    self._driver.destroy_gpu_instance(gpu, gi_id=gi.id)
                except MigAgentError as exc:
                    a.log.warning("gi_without_cis_not_destroyed", gpu=gpu, gi_id=gi.id, error=str(exc))
                    continue
                a.log.warning("gi_without_cis_destroyed", gpu=gpu, gi_id=gi.id, placement=str(gi.placement))

    def _execute_step(self, step: Step, observation: Observation) -> None:
        try:
            execute_step(self._driver, step, observation)
        except InsufficientResourcesError as exc:
            raise Replan(str(exc)) from exc
        except (NotSupportedError, ResetRequiredError) as exc:
            if _needs_reboot(step, exc):
                raise RebootNeeded(str(exc)) from exc
            raise
        if not step.is_done(self._observe_step_gpu(step)):
            raise PermanentError(f"{step.describe()}: the driver reported success but the node does not show it")

    def _observe_step_gpu(self, step: Step) -> Observation:
        # A step acts on one GPU and is judged on it alone: no need to re-read the whole node twice a step.
        return Observation(gpus=(self._driver.observe_gpu(step.gpu),))

    def _converged(self, a: _Attempt) -> ApplyResult:
        a.attempts, a.reboot_requested = 0, False
        # A phase is entered once its record is durable: a record the disk refuses fails from VERIFYING.
        self._save(a, Phase.CONVERGED)
        self._move(a, Phase.CONVERGED)
        a.log.info(
            "apply_converged", steps_run=len(a.steps_run), steps_skipped=len(a.steps_skipped),
            gpus_changed=sorted({step.gpu for step in a.steps_run}),
            seconds=round(self._clock.monotonic() - a.started_s, 3),
        )
        return a.result(ApplyOutcome.CONVERGED)

    # -- reboots and resets ---------------------------------------------------------------------

    def _check_reboot_outcome(self, a: _Attempt, observation: Observation, desired: DesiredNode) -> None:
        p = a.previous
        if p is None or p.phase is not Phase.REBOOT_REQUESTED or p.boot_id == a.boot_id:
            return
        for gpu in desired.gpus:
            seen = observation.gpu(gpu.index)
            if seen.mode_change_needs_reset and seen.mig_current != gpu.mig_enabled:
                wanted = "enabled" if gpu.mig_enabled else "disabled"
                raise PermanentError(f"reboot did not activate MIG mode on GPU {gpu.index}: wanted {wanted}")

    def _reboot_already_tried(self, a: _Attempt) -> bool:
        p = a.previous
        if p is None or not p.reboot_requested:
            return False
        return not (p.phase is Phase.REBOOT_REQUESTED and p.boot_id == a.boot_id)

    def _request_reboot(self, a: _Attempt, reason: str) -> ApplyResult:
        if not self._allow_reboot or self._reboot_requester is None:
            raise ResetRequiredError(f"{reason}; reboot the node, or allow migagent to (--allow-reboot)")
        if self._reboot_already_tried(a):
            raise PermanentError(f"reboot did not activate MIG mode: {reason}")
        a.reboot_requested = True
        self._save(a, Phase.REBOOT_REQUESTED)
        self._move(a, Phase.REBOOT_REQUESTED)
        a.log.warning("reboot_requested", reason=reason)
        self._reboot_requester.request_reboot(reason)
        return a.result(ApplyOutcome.REBOOT_REQUESTED, reason)

    def _stop_before_reset(self, a: _Attempt, step: Step) -> ApplyResult:
        self._save(a, Phase.IDLE)
        self._move(a, Phase.IDLE)
        reason = f"{step.describe()} skipped (skip-reset): the mode change activates at the next reset or reboot"
        a.log.info("reset_skipped", gpu=step.gpu)
        return a.result(ApplyOutcome.RESET_PENDING, reason)

    # -- bookkeeping ----------------------------------------------------------------------------

    def _fail(self, a: _Attempt, exc: MigAgentError) -> ApplyResult:
        """The one place an attempt becomes FAILED: record why (the caller decides when to try again)."""
        a.phase = transition(a.phase, Phase.FAILED)
        a.attempts += 1
        record = self._record(a, Phase.FAILED).evolve(last_error=str(exc))
        try:
            self._journal.save(record)
        except MigAgentError as journal_error:
            a.log.error("journal_write_failed", error=str(journal_error))
        a.log.error("apply_failed", error=str(exc), attempts=a.attempts)
        return a.result(ApplyOutcome.FAILED, str(exc))

    def _move(self, a: _Attempt, target: Phase) -> None:
        a.phase = transition(a.phase, target)
        a.log = a.log.bind(phase=target.value)
        a.log.debug("phase_changed")

    def _remaining(self, a: _Attempt) -> tuple[Step, ...]:
        return () if a.plan is None else a.plan.steps[a.step_index :]

    def _record(self, a: _Attempt, phase: Phase) -> JournalRecord:
        return JournalRecord(
            version=JOURNAL_VERSION,
            boot_id=a.boot_id,
            layout_hash=a.layout_hash,
            config_name=a.config_name,
            phase=phase,
            plan=a.plan,
            step_index=a.step_index,
            attempts=a.attempts,
            reboot_requested=a.reboot_requested,
        )

    def _save(self, a: _Attempt, phase: Phase) -> None:
        record = self._record(a, phase)
        if record != a.saved:
            self._journal.save(record)
            a.saved = record
