"""The head-to-head's text: the block for bench/README.md and the short summary for README.md, each
written between its markers by `python -m bench.head_to_head --write` (never by hand)."""

from __future__ import annotations

import datetime
import os
import platform
import re
from collections.abc import Sequence
from pathlib import Path

from bench.head_to_head.report import DESIGN_NOTES, details, figures, side_by_side, summarise
from bench.head_to_head.run import RunRecord
from bench.head_to_head.scenarios import DESCRIPTIONS

REPO = Path(__file__).resolve().parents[2]
BENCH_README = REPO / "bench" / "README.md"
README = REPO / "README.md"
BLOCK = "head-to-head"


def _markers(name: str) -> tuple[str, str]:
    return (
        f"<!-- bench:{name} begin: written by `python -m bench.head_to_head --write`; do not edit by hand -->",
        f"<!-- bench:{name} end -->",
    )


def render(
    records: Sequence[RunRecord],
    managers: Sequence[str],
    *,
    command: str,
    elapsed_s: float,
    drain_timeout_s: float,
    start_cost_s: float,
) -> str:
    """bench/README.md's block: where it ran, the side-by-side table, the figures, the details."""
    when = datetime.datetime.now(datetime.UTC)
    notes = [f"- {manager}: {DESIGN_NOTES[manager]}" for manager in managers if manager in DESIGN_NOTES]
    notes.append(
        f"- The simulator's share: each `nvidia-mig-parted` run costs {start_cost_s:.2f} s here to start the"
        " simulated driver (an embedded Python interpreter), which a real driver does not; mig-manager's script"
        f" runs it 6 times per change (about {6 * start_cost_s:.0f} s of its times) and 2 times when the GPUs"
        " already match. Every NVML call of either manager goes through the same simulator."
    )
    return "\n".join(
        [
            f"`{command}`, {when:%Y-%m-%d %H:%M} UTC, {elapsed_s / 60:.0f} min; Python {platform.python_version()},"
            f" {os.cpu_count()} CPU cores shared with other jobs, load average {os.getloadavg()[0]:.1f} at the end;"
            f" migagent with --drain-timeout {drain_timeout_s:g}.",
            "",
            side_by_side(records, managers, DESCRIPTIONS),
            "",
            *notes,
            "",
            figures(records),
            "",
            details(records),
        ]
    )


def summary(records: Sequence[RunRecord], managers: Sequence[str]) -> str:
    """README's lines: the plain change's time for each manager, and what each did with pods in the way."""
    by_key = {(s.scenario, s.manager): s for s in summarise(records)}
    last = {(r.scenario, r.manager): r for r in records}
    lines = []
    for manager in managers:
        parts = []
        plain = by_key.get(("no-pods", manager))
        if plain is not None and plain.p50_s is not None:
            parts.append(f"changes half the GPUs of an idle node in {plain.p50_s:.1f} s (label to `success`, p50)")
        with_pods = last.get(("pods", manager))
        if with_pods is not None:
            moved = len(with_pods.evicted) + len(with_pods.deleted)
            parts.append(
                f"with 3 GPU pods on the node it ends `{with_pods.final_state}`, moving {moved} pod(s) and keeping"
                f" {len(with_pods.kept_running)} running"
            )
        if parts:
            lines.append(f"- {manager}: " + "; ".join(parts) + ".")
    return "\n".join(lines)


def _replace(text: str, name: str, body: str) -> str:
    begin, end = _markers(name)
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} begin[^>]*-->\n.*?<!-- bench:{re.escape(name)} end -->", re.S)
    if not pattern.search(text):
        raise RuntimeError(f"no <!-- bench:{name} begin --> ... end markers to write between")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text, count=1)


def publish(records: Sequence[RunRecord], managers: Sequence[str], block: str) -> None:
    BENCH_README.write_text(_replace(BENCH_README.read_text(encoding="utf-8"), BLOCK, block), encoding="utf-8")
    README.write_text(
        _replace(README.read_text(encoding="utf-8"), f"{BLOCK}-summary", summary(records, managers)), encoding="utf-8"
    )
