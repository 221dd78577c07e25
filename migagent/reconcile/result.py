"""What one `ApplyEngine.apply` call ended with."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from migagent.planning import Plan
from migagent.planning.steps import Step


class ApplyOutcome(enum.StrEnum):
    CONVERGED = "converged"
    FAILED = "failed"
    REBOOT_REQUESTED = "reboot-requested"
    RESET_PENDING = "reset-pending"
    """The apply stopped before a GPU reset because resets were skipped (mig-parted --skip-reset)."""


@dataclass(frozen=True)
class ApplyResult:
    outcome: ApplyOutcome
    steps_run: tuple[Step, ...] = ()
    steps_skipped: tuple[Step, ...] = ()
    error: str | None = None
    plan: Plan | None = None

    @property
    def converged(self) -> bool:
        return self.outcome is ApplyOutcome.CONVERGED
