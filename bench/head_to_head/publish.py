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


def _headline(record: RunRecord, p50_s: float | None) -> str:
    """One manager on one scenario in a few words: the outcome and what it did to pods and GPUs."""
    if "admin" in record.notes:
        return "no change (the drain timed out)"
    moved = len(record.evicted) + len(record.deleted)
    kept = f"{len(record.kept)}/{len(record.kept) + record.destroyed} GPU instances kept"
    if record.succeeded:
        when = f" in {p50_s:.0f} s" if p50_s is not None else ""
        return f"`success`{when}, {moved} pod(s) moved, {kept}"
    left = f"left {record.gpus_after}" if record.gpus_touched else "GPUs untouched"
    return f"`{record.final_state}`, {moved} pod(s) moved, {left}"


SUMMARY_ROWS = (
    ("no-pods", "idle node, GPUs 0-3 change (label to `success`, p50)"),
    ("pods", "3 GPU pods on the node (on a kept instance, a changed one, an untouched GPU)"),
    ("pdb-for-ever", "a pod on a changed instance under a PDB that never allows"),
    ("killed-mid-change", "the manager killed mid-change and restarted"),
)


def summary(records: Sequence[RunRecord], managers: Sequence[str]) -> str:
    """README's table: a few scenarios, each manager in a few words."""
    p50 = {(s.scenario, s.manager): s.p50_s for s in summarise(records)}
    last = {(r.scenario, r.manager): r for r in records}
    lines = ["| | " + " | ".join(managers) + " |", "|---|" + "---|" * len(managers)]
    for scenario, title in SUMMARY_ROWS:
        cells = [
            _headline(last[(scenario, m)], p50.get((scenario, m))) if (scenario, m) in last else "not run"
            for m in managers
        ]
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def replace_block(text: str, name: str, body: str) -> str:
    begin, end = _markers(name)
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} begin[^>]*-->\n.*?<!-- bench:{re.escape(name)} end -->", re.S)
    if not pattern.search(text):
        raise RuntimeError(f"no <!-- bench:{name} begin --> ... end markers to write between")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text, count=1)


def publish(records: Sequence[RunRecord], managers: Sequence[str], block: str) -> None:
    BENCH_README.write_text(replace_block(BENCH_README.read_text(encoding="utf-8"), BLOCK, block), encoding="utf-8")
    README.write_text(
        replace_block(README.read_text(encoding="utf-8"), f"{BLOCK}-summary", summary(records, managers)),
        encoding="utf-8",
    )
