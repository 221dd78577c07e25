"""Host GPU clients (DCGM, dcgm-exporter, nvsm, ...) run as systemd services: stop them before the GPUs
change under them, start them again afterwards.

Semantics follow mig-parted's host-client handling (docs/mig-parted.md §8):
only active units are stopped, in list order and synchronously (a stop never waits on our own start
job, so it cannot deadlock); they are started again in reverse order with `--no-block`, because a
client ordered after migagent (After=nvidia-gpu-reset.target, say) would otherwise wait for us
while we wait for it. Starting is attempted for every stopped unit even when some fail.

The list of units this process stopped is written to a state file under /run/migagent before each
stop, so a host agent killed mid-change starts them again when it comes back (`recover`).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import structlog

from migagent.durable import read_bounded
from migagent.errors import PermanentError
from migagent.jsontext import decode_json

log = structlog.get_logger(__name__)

SYSTEMCTL_TIMEOUT_S = 120.0


class ServiceControlError(PermanentError):
    """A host GPU client could not be stopped; the GPUs were left untouched."""


class ServiceManager(Protocol):
    def is_active(self, unit: str) -> bool: ...

    def stop(self, unit: str) -> None:
        """Stop `unit` and return once it is stopped; raises ServiceControlError."""
        ...

    def start(self, unit: str) -> None:
        """Queue a start of `unit` without waiting for it; raises ServiceControlError."""
        ...


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    output: str


RunCommand = Callable[[Sequence[str]], CommandResult]


def run_command(argv: Sequence[str]) -> CommandResult:
    """Run `argv` with a bounded wait; a command that does not finish counts as failed (exit 124)."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=SYSTEMCTL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return CommandResult(124, f"did not finish within {SYSTEMCTL_TIMEOUT_S:g}s")
    except OSError as exc:
        return CommandResult(127, str(exc))
    return CommandResult(done.returncode, (done.stdout + done.stderr).strip())


class SystemctlServiceManager:
    """Talks to the host's systemd through `systemctl` (which uses D-Bus or systemd's private socket)."""

    def __init__(self, *, systemctl: str = "systemctl", run: RunCommand = run_command) -> None:
        self._systemctl = systemctl
        self._run = run

    def is_active(self, unit: str) -> bool:
        return self._run([self._systemctl, "is-active", "--quiet", unit]).returncode == 0

    def stop(self, unit: str) -> None:
        self._check(unit, "stop", self._run([self._systemctl, "stop", unit]))

    def start(self, unit: str) -> None:
        self._check(unit, "start", self._run([self._systemctl, "start", "--no-block", unit]))

    def _check(self, unit: str, verb: str, result: CommandResult) -> None:
        if result.returncode != 0:
            detail = f": {result.output}" if result.output else ""
            raise ServiceControlError(f"`systemctl {verb} {unit}` failed (exit {result.returncode}){detail}")


@dataclass(frozen=True)
class ServiceCall:
    action: str  # "stop" or "start"
    unit: str


class RecordingServiceManager:
    """An in-memory systemd: `active` units are running; every stop/start is recorded in order and
    handed to `on_call` (tests use it to see what the GPUs looked like at that moment)."""

    def __init__(
        self,
        *,
        active: Sequence[str] = (),
        failing: Sequence[str] = (),
        on_call: Callable[[ServiceCall], None] | None = None,
    ) -> None:
        self.active = set(active)
        self.failing = set(failing)
        self.calls: list[ServiceCall] = []
        self._on_call = on_call

    def is_active(self, unit: str) -> bool:
        return unit in self.active

    def stop(self, unit: str) -> None:
        self._record("stop", unit)
        self.active.discard(unit)

    def start(self, unit: str) -> None:
        self._record("start", unit)
        self.active.add(unit)

    def _record(self, action: str, unit: str) -> None:
        call = ServiceCall(action, unit)
        self.calls.append(call)
        if self._on_call is not None:
            self._on_call(call)
        if unit in self.failing:
            raise ServiceControlError(f"simulated failure to {action} {unit}")


class HostClients:
    """The configured host GPU clients, stopped and started as a group."""

    def __init__(self, manager: ServiceManager, units: Sequence[str], *, state_file: Path | None = None) -> None:
        self.units = tuple(units)
        self._manager = manager
        self._state_file = state_file

    def stop_all(self) -> tuple[str, ...]:
        """Stop the active units in list order; returns those stopped. If one cannot be stopped, it and
        the ones already stopped are started again (it was running when we came: a stop that failed
        or timed out may still complete) and ServiceControlError is raised."""
        stopped: list[str] = []
        for unit in self.units:
            if not self._manager.is_active(unit):
                continue
            try:
                self._remember([*stopped, unit])  # written first: a crash during the stop still restarts it
                self._manager.stop(unit)
            except ServiceControlError:
                self.start_all((*stopped, unit))
                raise
            stopped.append(unit)
            log.info("host_client_stopped", unit=unit)
        return tuple(stopped)

    def start_all(self, stopped: Sequence[str]) -> tuple[str, ...]:
        """Start `stopped` in reverse order without waiting; returns the units that failed to start
        (each is logged; the others are still started)."""
        failed: list[str] = []
        for unit in reversed(stopped):
            try:
                self._manager.start(unit)
                log.info("host_client_started", unit=unit)
            except ServiceControlError as exc:
                log.error("host_client_start_failed", unit=unit, error=str(exc))
                failed.append(unit)
        self._forget()
        return tuple(failed)

    def recover(self) -> tuple[str, ...]:
        """Start the units a previous run stopped and never started again (it was killed)."""
        left = self._remembered()
        if left:
            log.warning("host_clients_left_stopped", units=list(left))
            self.start_all(left)
        return left

    def _remember(self, units: Sequence[str]) -> None:
        if self._state_file is None:
            return
        tmp = self._state_file.with_name(f".{self._state_file.name}.tmp")
        try:
            self._state_file.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"stopped": list(units)}), encoding="utf-8")
            os.replace(tmp, self._state_file)
        except OSError as exc:
            # Without the record a crash would leave clients stopped for good: better not to stop them.
            raise ServiceControlError(
                f"cannot record the stopped host GPU clients in {self._state_file}: {exc}"
            ) from exc

    def _forget(self) -> None:
        if self._state_file is None:
            return
        try:
            self._state_file.unlink(missing_ok=True)
        except OSError as exc:  # the clients are running again; a stale record only restarts them once more
            log.warning("host_clients_state_not_removed", path=str(self._state_file), error=str(exc))

    def _remembered(self) -> tuple[str, ...]:
        if self._state_file is None:
            return ()
        try:
            data = decode_json(read_bounded(self._state_file))
            return tuple(str(unit) for unit in data["stopped"])
        except FileNotFoundError:
            return ()
        except (ValueError, KeyError, TypeError) as exc:
            # Not guessed from the configured list: that could start a unit an admin stopped on purpose.
            log.error("host_clients_state_unreadable", path=str(self._state_file), error=str(exc))
            self._forget()
            return ()
