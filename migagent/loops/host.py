"""Host mode: a long-running agent that keeps the node's MIG layout equal to the selected layout.

It applies once at start, tells systemd it is ready, then waits: a change to the layout file or to
the selected-layout file (reported by a file watch through `request_reconcile`), SIGHUP, or the
retry timer after a failure starts another reconcile. The retry timer is the shared `RetryPolicy`'s
failure back-off (doubling per consecutive failure), the same schedule the apply engine is given. A
reconcile that finds nothing to change touches nothing, not even the host GPU clients; otherwise the
clients are stopped first and always started again afterwards, whether the apply succeeded or not.

Threads: the caller's thread runs the loop (and every NVML call); a second thread only sends
WATCHDOG=1, and withholds it if one apply runs longer than `max_apply_s`, so systemd restarts an
agent that is stuck while an apply that is merely slow (GPU resets) is left alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from migagent.attempt.window.services import HostClients
from migagent.clock import Clock
from migagent.errors import MigAgentError
from migagent.layout.observed import Observation
from migagent.layout.resolve import identity_of, resolve_config
from migagent.layout.spec import LayoutFile
from migagent.plumbing.sdnotify import Notifier
from migagent.reconcile.assertion import config_mismatches, mode_mismatches
from migagent.reconcile.retry import RetryPolicy
from migagent.reconcile.session import ApplySession, RebootPendingError

log = structlog.get_logger(__name__)

_IDLE_WAIT_S = 3600.0  # nothing to do: wake up now and then anyway, harmlessly


@dataclass(frozen=True)
class Selection:
    """What to apply: a parsed layout file and the selected config name (None: its only config;
    "": none selected yet, nothing to apply)."""

    layout: LayoutFile
    config_name: str | None


ReadSelection = Callable[[], Selection]
SessionFactory = Callable[[str], ApplySession]
"""Builds the apply session (engine, journal, hooks) for one config name."""


@dataclass(frozen=True)
class HostSettings:
    debounce_s: float = 2.0
    """Wait this long after the last file event before applying: an edit comes as several events."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """After a failed apply, try again `retry.failure_delay(failures)` later (or sooner, on the next change);
    the sessions' engines get the same policy."""
    max_apply_s: float = 1800.0
    """An apply running longer than this counts as hung: the watchdog pings stop."""


class HostAgent:
    """The host-mode loop. Its clock must really block in `wait` (SystemClock): the loop and the
    watchdog thread are driven by events and timeouts, and a FakeClock would make them spin."""

    def __init__(
        self,
        *,
        observe: Callable[[], Observation],
        read_selection: ReadSelection,
        sessions: SessionFactory,
        clients: HostClients,
        notifier: Notifier,
        clock: Clock,
        settings: HostSettings | None = None,
    ) -> None:
        self._observe = observe
        self._read_selection = read_selection
        self._sessions = sessions
        self._clients = clients
        self._notifier = notifier
        self._clock = clock
        self._settings = settings or HostSettings()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._busy_since: float | None = None
        self._next_retry: float | None = None
        self._failures = 0
        self._reboot_requested = False

    # -- called from other threads ----------------------------------------------------------------

    def request_reconcile(self) -> None:
        """Something may have changed (file event, SIGHUP): reconcile once things are quiet."""
        self._wake.set()

    def stop(self) -> None:
        """Finish the apply in progress, if any, then return from `run`."""
        self._stopping.set()
        self._wake.set()

    # -- the loop -----------------------------------------------------------------------------------

    def run(self) -> None:
        pinger = threading.Thread(target=self._ping_watchdog, name="migagent-watchdog", daemon=True)
        pinger.start()
        try:
            self._clients.recover()
            self._notifier.ready(self._reconcile())
            while not self._stopping.is_set():
                if self._wait_for_work():
                    self._notifier.status(self._reconcile())
        finally:
            self._stopping.set()
            self._notifier.stopping("stopping")
            pinger.join()
            log.info("host_mode_stopped")

    def _wait_for_work(self) -> bool:
        """Block until there is something to do; False when stopping (or nothing to do after all)."""
        timeout = _IDLE_WAIT_S if self._next_retry is None else self._next_retry - self._clock.monotonic()
        woke = self._clock.wait(self._wake, timeout)
        if self._stopping.is_set():
            return False
        if not woke:
            return self._next_retry is not None and self._clock.monotonic() >= self._next_retry
        self._wake.clear()
        while self._clock.wait(self._wake, self._settings.debounce_s) and not self._stopping.is_set():
            self._wake.clear()  # still changing: wait for quiet again
        return not self._stopping.is_set()

    def _reconcile(self) -> str:
        """One reconcile; returns the STATUS line describing its outcome."""
        if self._reboot_requested:
            return "reboot requested; waiting for the node to reboot"
        self._busy_since = self._clock.monotonic()
        try:
            status = self._apply_selected()
            self._next_retry, self._failures = None, 0
        except RebootPendingError as exc:
            self._reboot_requested = True
            status = f"reboot requested: {exc}"
            log.warning("host_reboot_requested", reason=str(exc))
        except MigAgentError as exc:
            self._failures += 1
            retry = self._settings.retry.failure_delay(self._failures)
            self._next_retry = self._clock.monotonic() + retry
            status = f"apply failed: {exc}; retrying in {retry:g}s or on the next change"
            log.error("host_apply_failed", error=str(exc), retry_in_s=retry)
        finally:
            self._busy_since = None
        return status

    def _apply_selected(self) -> str:
        selection = self._read_selection()
        if selection.config_name == "":
            log.info("host_no_layout_selected", hint="set MIGAGENT_LAYOUT=<config> to apply one")
            return "no layout selected (MIGAGENT_LAYOUT is empty); nothing changed"
        observation = self._observe()
        desired = resolve_config(
            selection.layout, selection.config_name, [identity_of(gpu) for gpu in observation.gpus]
        )
        name = selection.config_name or selection.layout.names[0]  # resolve_config checked the choice
        if not (mode_mismatches(observation, desired) or config_mismatches(observation, desired)):
            log.info("host_layout_already_applied", config=name)
            return f"config {name} applied; nothing to change"
        self._notifier.status(f"applying config {name}")
        stopped = self._clients.stop_all()
        try:
            self._sessions(name).run(desired, config_name=name, mode_only=False)
        finally:
            not_started = self._clients.start_all(stopped)
        log.info("host_layout_applied", config=name, clients_restarted=list(stopped))
        if not_started:
            return f"config {name} applied; could not start {', '.join(not_started)}"
        return f"config {name} applied"

    # -- the watchdog thread ------------------------------------------------------------------------

    def _ping_watchdog(self) -> None:
        interval = self._notifier.watchdog_interval_s
        if interval is None:
            return
        while not self._clock.wait(self._stopping, interval):
            if self._healthy():
                self._notifier.watchdog()
            else:
                log.error("watchdog_withheld", reason=f"an apply has run longer than {self._settings.max_apply_s:g}s")

    def _healthy(self) -> bool:
        busy_since = self._busy_since
        return busy_since is None or self._clock.monotonic() - busy_since < self._settings.max_apply_s
