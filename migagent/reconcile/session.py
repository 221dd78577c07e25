"""mig-parted's `apply` sequence around the engine: hooks, the mode part, then the device part.

Order (docs/mig-parted.md §5): apply-start; unless mode-only, a pure check that the
whole layout fits and touches no MIG device in use, so that a layout that will be refused changes
nothing, not even a MIG mode; if the MIG modes are not as desired, pre-apply-mode and the mode
part; unless mode-only, if the devices are not as desired, pre-apply-config and the device part;
apply-exit always, its failure reported only when nothing else failed. Each part is one engine
apply, journaled under its own key, so a crash inside either resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from migagent.errors import MigAgentError, PermanentError
from migagent.layout.desired import DesiredGpu, DesiredNode
from migagent.layout.observed import Observation
from migagent.planning import plan
from migagent.reconcile.assertion import config_mismatches, mode_mismatches, mode_only_target
from migagent.reconcile.hooks import HookRunner
from migagent.reconcile.journal import desired_node_hash
from migagent.reconcile.machine import ApplyEngine, ApplyOutcome, ApplyResult
from migagent.reconcile.safety import check_nothing_in_use

log = structlog.get_logger(__name__)


class RebootPendingError(MigAgentError):
    """The apply stopped because a reboot was requested to activate a MIG mode change."""


@dataclass
class SessionReport:
    """What the sequence did: the engine results of the parts that ran, and the hooks run."""

    mode: ApplyResult | None = None
    config: ApplyResult | None = None
    hooks_run: list[str] = field(default_factory=list)

    @property
    def results(self) -> tuple[ApplyResult, ...]:
        return tuple(r for r in (self.mode, self.config) if r is not None)


@dataclass(frozen=True)
class ApplySession:
    engine: ApplyEngine
    observe: Callable[[], Observation]
    hooks: HookRunner | None = None
    checkpoint: Callable[[], None] | None = None
    """Runs between two engine steps (see `ApplyEngine.apply`); what it raises stops the apply there."""

    def run(self, desired: DesiredNode, *, config_name: str, mode_only: bool) -> SessionReport:
        """Run the sequence; raises the first failure (after apply-exit ran)."""
        report = SessionReport()
        try:
            self._hook("apply-start", report)
            self._refuse_before_any_change(desired, mode_only=mode_only)
            self._mode_part(desired, config_name=config_name, report=report, mode_only=mode_only)
            if not mode_only:
                self._config_part(desired, config_name=config_name, report=report)
        except BaseException:
            self._exit_hook_after_failure(report)
            raise
        self._hook("apply-exit", report)
        return report

    def _refuse_before_any_change(self, desired: DesiredNode, *, mode_only: bool) -> None:
        """Raise what the config part would raise half way, and a journal that cannot hold this apply
        (full, read-only disk), before the mode part changes anything.

        The mode and config parts are separate engine runs, so without this a layout that does not fit
        one GPU (or would destroy a busy GI) would still switch MIG modes, and reset Ampere GPUs,
        before being refused. Planning is pure, so this costs no NVML call beyond the observation.
        """
        observation = self.observe()
        target = mode_only_target(observation, desired) if mode_only else desired
        whole = plan(observation, _checkable(observation, target))
        if not mode_only:
            check_nothing_in_use(whole.steps, observation)
        if not whole.is_empty or self.engine.journal_unsettled():  # else nothing will be written
            self.engine.check_storage(whole)

    def _mode_part(self, desired: DesiredNode, *, config_name: str, report: SessionReport, mode_only: bool) -> None:
        observation = self.observe()
        target = mode_only_target(observation, desired)
        if mode_mismatches(observation, desired):
            self._hook("pre-apply-mode", report)
        elif not (mode_only and self.engine.journal_unsettled()):
            return
        # Nothing to do but an earlier attempt's record open (applying, failed): the run records convergence.
        report.mode = self.engine.apply(
            target, layout_hash=f"mode:{desired_node_hash(target)}", config_name=config_name,
            checkpoint=self.checkpoint, part_of=None if mode_only else desired,
        )
        _raise_unless_done(report.mode, allow_reset_pending=mode_only)

    def _config_part(self, desired: DesiredNode, *, config_name: str, report: SessionReport) -> None:
        if config_mismatches(self.observe(), desired):
            self._hook("pre-apply-config", report)
        elif not self.engine.journal_unsettled():
            return
        # As in the mode part: an apply with nothing left to do still closes a record left open.
        report.config = self.engine.apply(
            desired, layout_hash=desired_node_hash(desired), config_name=config_name, checkpoint=self.checkpoint
        )
        _raise_unless_done(report.config, allow_reset_pending=False)

    def _hook(self, name: str, report: SessionReport) -> None:
        if self.hooks is not None:
            report.hooks_run.append(name)
            self.hooks.run(name)

    def _exit_hook_after_failure(self, report: SessionReport) -> None:
        try:
            self._hook("apply-exit", report)
        except MigAgentError as exc:  # the earlier failure is the one to report
            log.error("apply_exit_hook_failed", error=str(exc))


def _judged_now(observation: Observation, want: DesiredGpu) -> bool:
    """Whether the fit of this GPU's entry can be judged now (its profile table is known, or it
    asks for no instances); a GPU whose table appears only once MIG is on is judged by the config part."""
    gpu = next((g for g in observation.gpus if g.index == want.index), None)
    return gpu is None or gpu.profiles is not None or not want.gpu_instances


def _checkable(observation: Observation, desired: DesiredNode) -> DesiredNode:
    return DesiredNode(gpus=tuple(g for g in desired.gpus if _judged_now(observation, g)))


def _raise_unless_done(result: ApplyResult, *, allow_reset_pending: bool) -> None:
    match result.outcome:
        case ApplyOutcome.CONVERGED:
            return
        case ApplyOutcome.RESET_PENDING if allow_reset_pending:
            return
        case ApplyOutcome.RESET_PENDING:
            raise PermanentError(
                f"unable to apply MIG config with the MIG mode change still pending: {result.error};"
                " reset the GPU or reboot, or apply without --skip-reset"
            )
        case ApplyOutcome.REBOOT_REQUESTED:
            raise RebootPendingError(f"reboot requested to activate the MIG mode: {result.error}")
        case ApplyOutcome.FAILED:
            raise PermanentError(result.error or "apply failed")
