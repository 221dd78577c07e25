"""How an apply ends, for the person who ran it: one count of steps, or a stop at a safe point.

SIGINT (Ctrl-C) and SIGTERM stop `apply` alike: at the next safe point between two journaled steps,
never inside one (an NVML call or a GPU reset is not cut short), with one line and the exit a shell
reports for that signal (130, 143).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from migagent.errors import MigAgentError
from migagent.layout.observed import Observation
from migagent.planning.render import describe_step
from migagent.reconcile.machine import ApplyEngine
from migagent.reconcile.session import SessionReport

EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a command SIGTERM stopped
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped


def print_report(report: SessionReport, observation: Observation) -> None:
    # On a terminal each step was shown as it ended (progress_log): list them here only otherwise.
    if not sys.stderr.isatty():
        for result in report.results:
            for step in result.steps_run:
                print(f"  {describe_step(step, observation)}")
    print(steps_summary(report))


def steps_summary(report: SessionReport) -> str:
    """One count, in steps as `plan` counts them ("N step(s) in all"). The MIG mode part and the instance
    part are separate engine runs (mig-parted's order), each summarised as it ends; this line adds
    them up, and says how many steps needed no call (a GPU reset together with another, or an earlier run)."""
    mode, config = (0 if r is None else len(r.steps_run) + len(r.steps_skipped) for r in (report.mode, report.config))
    skipped = sum(len(result.steps_skipped) for result in report.results)
    if not mode + config:
        return "nothing to change"
    text = f"{mode + config} step(s) in all"
    if mode and config:
        text += f": {mode} for MIG modes, then {config} for the instances"
    if skipped:
        text += f"; {skipped} of them found already done (a GPU reset with another, or by an earlier run)"
    return text


class StopRequested(Exception):  # noqa: N818 - a stop request, not an error
    """SIGTERM or SIGINT arrived: the apply stops at the next safe point (between two journaled steps)."""


@dataclass
class StopSignals:
    """Which stop signal arrived first; the apply checks it between two steps."""

    signal_name: str | None = None
    exit_code: int = 0

    def actions(self) -> dict[signal.Signals, Callable[[], None]]:
        """For `signals_handled`: SIGTERM and SIGINT each record themselves (the first one counts)."""
        return {
            signal.SIGTERM: self.on("SIGTERM", EXIT_TERMINATED),
            signal.SIGINT: self.on("SIGINT (Ctrl-C)", EXIT_INTERRUPTED),
        }

    def on(self, name: str, code: int) -> Callable[[], None]:
        def arrived() -> None:
            if self.signal_name is None:
                # One write, before the stop is seen: this runs on a thread of its own, beside the progress lines.
                sys.stderr.write(f"migagent apply: {name}: stopping after the step in progress\n")
                sys.stderr.flush()
                self.signal_name, self.exit_code = name, code
        return arrived

    def checkpoint(self) -> None:
        if self.signal_name is not None:
            raise StopRequested

    def ignore_further(self) -> None:
        """The stop has said its line: a second Ctrl-C or SIGTERM until the process exits changes nothing
        (no second line, no death by the signal while the node's state and lock are put away)."""
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, signal.SIG_IGN)


def finished(stop: StopSignals) -> int:
    """0; or, for a stop that came with no NVML call left to make, the signal's exit and a line saying so."""
    if stop.signal_name is None:
        return 0
    stop.ignore_further()
    print(f"migagent apply: {stop.signal_name} came after the last change: the apply finished", file=sys.stderr)
    return stop.exit_code


def stopped(stop: StopSignals, engine: ApplyEngine) -> int:
    """The step in progress finished and is journaled; the next one never began. A GPU instance this
    apply left without its compute instances at that point (created, or emptied for destruction: its
    journal says which) is destroyed, so no stop leaves one of its own: the next apply plans from what
    is there. Another tool's bare GPU instance, on a GPU the config may not select, is left and named."""
    stop.ignore_further()
    try:
        settled, others = engine.settle()
    except MigAgentError as exc:  # the stop is still reported, with what is left to clean
        left = f"; GPU instances the stop left without compute instances could not be destroyed: {exc}"
    else:
        left = f"; destroyed {len(settled)} GPU instance(s) the stop left without compute instances" if settled else ""
        if others:
            left += f"; left {', '.join(others)} without compute instances: this apply did not make them"
    print(f"migagent apply: stopped by {stop.signal_name} between two steps{left}: run the same apply again to"
          " finish", file=sys.stderr)
    return stop.exit_code
