"""What `migagent rollout` shows while it drives: a live table per wave and node on a terminal, one
JSON object per event otherwise; and at the end, predicted against actual evictions per node.

The table is redrawn in place (ANSI cursor-up and clear) whenever it changes; the events above it
are one line each, so the scroll-back keeps the history.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TextIO

from migagent.clock import Clock
from migagent.rollout.port import LiveNode
from migagent.rollout.state import NodeRecord, NodeStatus, Phase, RolloutState

COLUMNS = ("WAVE", "NODE", "STATE", "GPUS", "EVICTIONS", "SECONDS", "AGENT / REASON")


def _seconds(record: NodeRecord, live: LiveNode | None, now: float) -> str:
    if live is not None:
        return f"{live.seconds:.0f}"
    if record.started_at is not None:
        end = record.finished_at if record.finished_at is not None else now
        return f"{max(0.0, end - record.started_at):.0f}"
    return "-"


def node_rows(state: RolloutState, live: Mapping[str, LiveNode], now: float) -> list[tuple[str, ...]]:
    order = {NodeStatus.IN_FLIGHT: 0, NodeStatus.FAILED: 1, NodeStatus.OVERRIDDEN: 2, NodeStatus.DONE: 3,
             NodeStatus.PENDING: 4, NodeStatus.SKIPPED: 5}
    records = sorted(state.nodes.values(), key=lambda r: (r.wave if r.wave is not None else 10**6, order[r.status],
                                                          r.node))
    rows: list[tuple[str, ...]] = []
    for record in records:
        seen = live.get(record.node)
        evicted = seen.evicted if seen is not None else record.evicted
        evictions = f"{len(evicted)}/{len(record.predicted)}" if record.wave is not None else "-"
        detail = (seen.agent if seen is not None else "") or record.reason
        rows.append((
            str(record.wave) if record.wave is not None else "-", record.node, str(record.status),
            str(record.gpus), evictions, _seconds(record, seen, now), detail or "-",
        ))
    return rows


def table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(c) for c in column) for column in zip(COLUMNS, *rows, strict=False)]
    return ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip() for cells in [COLUMNS, *rows]]


def headline(state: RolloutState) -> str:
    spec = state.spec
    counts = {status: len(state.in_status(status)) for status in NodeStatus}
    done = counts[NodeStatus.DONE]
    return (
        f"rollout {state.name} ({state.mode}): {state.phase}; {' '.join(spec.flags()[:2])};"
        f" wave {state.waves}; {done}/{len(state.nodes)} done, {counts[NodeStatus.IN_FLIGHT]} in flight,"
        f" {counts[NodeStatus.FAILED]} failed (budget {spec.failure_budget}), {counts[NodeStatus.SKIPPED]} skipped,"
        f" {counts[NodeStatus.OVERRIDDEN]} changed by someone else; --max-unavailable {spec.max_unavailable.flag}"
    )


def _items(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list | tuple) else []


def _describe(event: str, fields: Mapping[str, object]) -> str:
    get = fields.get
    match event:
        case "wave_started":
            kind = "canary wave" if get("canary") else "wave"
            predicted = get("predicted_evictions")
            evicts = sum(len(_items(v)) for v in predicted.values()) if isinstance(predicted, dict) else 0
            text = (f"{kind} {get('wave')}: {', '.join(_items(get('nodes')))} ({get('gpus')} GPU(s) of"
                    f" {get('max_unavailable')}; {evicts} eviction(s) predicted)")
        case "node_done":
            text = (f"{get('node')} done: evicted {len(_items(get('evicted')))}"
                    f" (predicted {len(_items(get('predicted')))})")
        case "node_failed":
            text = f"{get('node')} FAILED: {get('reason')}"
        case "halted":
            text = (f"HALTED after {get('failed')} failed node(s) (--failure-budget {get('failure_budget')}):"
                    f" {'; '.join(_items(get('reasons')))}")
        case "canary_done":
            text = f"canary succeeded; soaking {get('soak_s')}s before the next wave"
        case "wave_waiting":
            text = "waiting: " + "; ".join(_items(get("reasons")))
        case "node_left_alone":
            text = f"{get('node')} LEFT ALONE: {get('reason')}"
        case _:  # a list as its items, not Python's repr (`failed=[]`)
            text = f"{event}: " + ", ".join(
                f"{k}={', '.join(_items(v)) or 'none' if isinstance(v, list | tuple) else v}"
                for k, v in fields.items() if k != "rollout"
            )
    return text


class JsonEvents:
    """One JSON object per line per event (for logs and pipes); no table."""

    def __init__(self, clock: Clock, out: TextIO | None = None) -> None:
        self._clock = clock
        self._out = out or sys.stdout

    def event(self, event: str, **fields: object) -> None:
        print(json.dumps({"event": event, "time": round(self._clock.wall(), 3), **fields}, sort_keys=True,
                         default=str), file=self._out, flush=True)

    def progress(self, state: RolloutState, live: Mapping[str, LiveNode]) -> None:
        return None


class LiveTable:
    """A table redrawn in place under one line per event."""

    def __init__(self, clock: Clock, out: TextIO | None = None, *, redraw: bool = True) -> None:
        self._clock = clock
        self._out = out or sys.stdout
        self._drawn: list[str] = []
        self._redraw = redraw

    def event(self, event: str, **fields: object) -> None:
        if event == "node_relabelled":
            return  # the table shows it
        lines = list(self._drawn)
        self._erase()
        print(_describe(event, fields), file=self._out)
        self._draw(lines)

    def progress(self, state: RolloutState, live: Mapping[str, LiveNode]) -> None:
        lines = [headline(state), *table(node_rows(state, live, self._clock.wall()))]
        if lines != self._drawn:
            self._erase()
            self._draw(lines)

    def _erase(self) -> None:
        if self._drawn and self._redraw:
            self._out.write(f"\x1b[{len(self._drawn)}F\x1b[J")
        self._drawn = []

    def _draw(self, lines: list[str]) -> None:
        if not self._redraw:
            return
        for line in lines:
            print(line, file=self._out)
        self._out.flush()
        self._drawn = lines


def evictions_report(state: RolloutState) -> list[str]:
    """Predicted against actual evictions, per node that went in a wave."""
    rows = [("NODE", "WAVE", "STATE", "PREDICTED", "ACTUAL", "MATCH")]
    for record in sorted(state.nodes.values(), key=lambda r: (r.wave or 0, r.node)):
        if record.wave is None:
            continue
        match = "yes" if set(record.predicted) == set(record.evicted) else "NO"
        rows.append((record.node, str(record.wave), str(record.status), ", ".join(record.predicted) or "-",
                     ", ".join(record.evicted) or "-", match))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def ending_lines(state: RolloutState) -> list[str]:
    """The end report: evictions predicted against actual, the outcome, and what the rollout left alone."""
    lines = ["", *evictions_report(state), "", f"rollout {state.name}: {state.phase}"]
    lines += [f"  {reason}" for reason in state.reasons]
    for status, said in ((NodeStatus.SKIPPED, "skipped, not changed"),
                         (NodeStatus.OVERRIDDEN, "changed by someone else, left alone (undo will not change them)")):
        left = state.in_status(status)
        lines += [f"{len(left)} node(s) {said}:"] * bool(left) + [f"  {r.node}: {r.reason}" for r in left]
    if state.phase is Phase.HALTED:
        lines.append(f"clear the fault, then: migagent rollout resume {state.name}")
    elif state.phase is Phase.PAUSED:
        lines.append(f"paused; continue with: migagent rollout resume {state.name}")
    return lines
