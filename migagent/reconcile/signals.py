"""Control-flow signals inside the apply engine: not errors, so they never reach FAILED directly.

They derive from Exception but not from MigAgentError, so the engine's error handling cannot
mistake them for a failure, and tenacity does not retry them.
"""

from __future__ import annotations

from migagent.planning.steps import Step


class Replan(Exception):  # noqa: N818 - a signal, not an error
    """The node is not where the plan expected it at this step: observe and plan again."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RebootNeeded(Exception):  # noqa: N818 - a signal, not an error
    """A MIG mode change can only be activated by rebooting (GPU reset unsupported)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ResetSkipped(Exception):  # noqa: N818 - a signal, not an error
    """The next step is a GPU reset and resets were skipped on request."""

    def __init__(self, step: Step) -> None:
        super().__init__(step.describe())
        self.step = step
