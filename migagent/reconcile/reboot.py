"""Asking the host to reboot, for MIG mode changes that only a reboot can activate."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence

import structlog

from migagent.errors import PermanentError

log = structlog.get_logger(__name__)

RunReboot = Callable[[Sequence[str]], int]


def _run(argv: Sequence[str]) -> int:
    return subprocess.run(list(argv), check=False).returncode


class CommandRebootRequester:
    """Runs a reboot command (default `systemctl reboot`, which returns once the reboot is queued)."""

    def __init__(self, argv: Sequence[str] = ("systemctl", "reboot"), *, run: RunReboot = _run) -> None:
        self._argv = tuple(argv)
        self._run = run

    def request_reboot(self, reason: str) -> None:
        log.warning("reboot_command_started", argv=list(self._argv), reason=reason)
        try:
            code = self._run(self._argv)
        except OSError as exc:
            raise PermanentError(f"cannot request a reboot with `{' '.join(self._argv)}`: {exc}") from exc
        if code != 0:
            raise PermanentError(f"`{' '.join(self._argv)}` failed with exit status {code}; reboot the node by hand")


class RecordingRebootRequester:
    """Remembers reboot requests instead of rebooting: for simulated nodes and tests."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def request_reboot(self, reason: str) -> None:
        self.reasons.append(reason)
