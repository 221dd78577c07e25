"""Progress of an apply, told by the engine's own log events.

The engine logs `step_started`, `step_succeeded` (with `seconds`), `step_failed` and
`apply_converged` (the summary). In JSON logs these are ordinary events. On a terminal each step
is one short line a person can follow, GPU, action, profile and placement first, when it ends
(`step_started` is not shown there):

    GPU 0: create 3g.40gb at slot 4 (0.12s)
    GPU 0: destroy 1g.10gb at slot 2 failed after 0.03s: ...
    applied config all-balanced: 14 step(s) on GPU 0, 1 in 1.31s (3 already done)

(`apply` first sets MIG modes in an engine run of its own, summarised as "set MIG modes for config ...".)

One-shot commands log warnings only; `apply` still shows these: `keep_progress_events` lets them through.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

import structlog

PROGRESS_EVENTS = frozenset({"step_started", "step_succeeded", "step_failed", "apply_converged"})


def keep_progress_events(level: int, *, progress: bool) -> structlog.typing.Processor:
    """Drop events below `level`, except progress events when `progress` (the logger filters at INFO)."""

    def processor(_logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        below = logging.getLevelNamesMapping().get(method.upper(), logging.INFO) < level
        if below and not (progress and event_dict.get("event") in PROGRESS_EVENTS):
            raise structlog.DropEvent
        return event_dict

    return processor


def progress_line(event_dict: MutableMapping[str, Any]) -> str | None:
    """The terminal line of a progress event ("" when it shows none); None for any other event."""
    event = event_dict.get("event")
    step = event_dict.get("step", "")
    if event == "step_started":
        return ""  # the step's line comes when it ends: one line per step
    if event == "step_succeeded":
        return f"{step} ({float(event_dict.get('seconds', 0.0)):.2f}s)"
    if event == "step_failed":
        return f"{step} failed after {float(event_dict.get('seconds', 0.0)):.2f}s: {event_dict.get('error', '')}"
    if event == "apply_converged":
        gpus = ", ".join(str(gpu) for gpu in event_dict.get("gpus_changed", ())) or "none"
        skipped = int(event_dict.get("steps_skipped", 0))
        # `apply` sets MIG modes in a run of its own first (mig-parted's order), hashed "mode:..."
        what = "set MIG modes for" if str(event_dict.get("layout_hash", "")).startswith("mode:") else "applied"
        return (
            f"{what} config {event_dict.get('config', '?')}: {event_dict.get('steps_run', 0)} step(s) on GPU {gpus}"
            f" in {float(event_dict.get('seconds', 0.0)):.2f}s" + (f" ({skipped} already done)" if skipped else "")
        )
    return None


def with_progress_lines(renderer: structlog.typing.Processor) -> structlog.typing.Processor:
    """`renderer`, except that progress events become their short line (or none)."""

    def render(logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> Any:
        line = progress_line(event_dict)
        if line == "":
            raise structlog.DropEvent
        return line if line is not None else renderer(logger, method, event_dict)

    return render
