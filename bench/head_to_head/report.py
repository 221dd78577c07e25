"""Turn run records into what a user reads: one row per scenario with both managers side by side, the
figures per manager, each run's facts checked for sameness across the repeats, and one timeline each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.head_to_head.gpus import count_text, gpu_ranges
from bench.head_to_head.run import RunRecord
from bench.tables import percentile

DESIGN_NOTES = {
    "mig-manager": (
        "mig-manager never evicts or cordons, by design: it pauses the GPU Operator's operands and expects the"
        " GPUs to be idle (NVIDIA asks admins to drain first: the `mig-manager+drain` column). A pod on a GPU"
        " it must rebuild makes NVML refuse (IN_USE) and the change fail, after whatever it destroyed before"
        " reaching that instance; its pod columns are what its design does, not a score."
    ),
    "mig-manager+drain": (
        "mig-manager with NVIDIA's documented procedure around it (gpu-operator#262): the admin runs `kubectl"
        " drain --ignore-daemonsets` (evictions, budgets respected, the same timeout as migagent's drain), writes"
        " the label, waits for `success` and uncordons; timed from the start of the drain. When the drain times"
        " out the admin uncordons and writes no label."
    ),
}


@dataclass(frozen=True)
class Summary:
    """One manager on one scenario over its repeated runs."""

    scenario: str
    manager: str
    runs: int
    successes: int
    p50_s: float | None
    p95_s: float | None
    advertised_p50_s: float | None
    failed_p50_s: float | None
    facts: tuple[str, ...]
    """The run's facts (pods, GPUs, state); one entry when every run agreed."""
    same_facts: bool


def facts(record: RunRecord) -> str:
    """What the run did, without times: the part a repeat must reproduce exactly."""
    pods = []
    if record.evicted:
        pods.append(f"evicted {', '.join(record.evicted)}")
    if record.deleted:
        pods.append(f"deleted {', '.join(record.deleted)}")
    if record.kept_running:
        pods.append(f"kept running {', '.join(record.kept_running)}")
    kept = f"{len(record.kept)} GIs kept" if record.kept else "no GI kept"
    gpus = (
        f"GPUs touched: {gpu_ranges(record.gpus_touched)}; {kept}, {record.destroyed} destroyed,"
        f" {record.created} created"
    )
    left = [f"state {record.final_state}"]
    if record.left_cordoned:
        left.append("left cordoned")
    if record.left_paused:
        left.append(f"left paused: {', '.join(record.left_paused)}")
    return "; ".join([*pods, gpus, *left])


def _p(samples: Sequence[float], q: float) -> float | None:
    return percentile(samples, q) if samples else None


def summarise(records: Sequence[RunRecord]) -> list[Summary]:
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for record in records:
        groups.setdefault((record.scenario, record.manager), []).append(record)
    summaries = []
    for (scenario, manager), runs in groups.items():
        times = [r.success_s for r in runs if r.succeeded and r.success_s is not None]
        advertised = [r.advertised_s for r in runs if r.advertised_s is not None]
        failed = [r.failed_s for r in runs if r.failed_s is not None]
        seen = tuple(dict.fromkeys(facts(r) for r in runs))
        summaries.append(
            Summary(
                scenario,
                manager,
                len(runs),
                len(times),
                _p(times, 50),
                _p(times, 95),
                _p(advertised, 50),
                _p(failed, 50),
                seen,
                len(seen) == 1,
            )
        )
    return summaries


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def cell(summary: Summary, record: RunRecord) -> str:
    """The short text of one manager on one scenario, for the side-by-side table."""
    if "admin" in record.notes:
        outcome = f"**no change**: {record.notes['admin']}"
    elif summary.successes:
        outcome = f"**success** in {_seconds(summary.p50_s)} s (p95 {_seconds(summary.p95_s)})"
        if summary.successes < summary.runs:
            outcome += f", {summary.successes}/{summary.runs} runs"
    else:
        outcome = f"**{record.final_state}**" + (
            f" after {_seconds(summary.failed_p50_s)} s" if summary.failed_p50_s is not None else ""
        )
    if record.success_entries > 1:
        outcome += f", `success` reported {record.success_entries} times (first for an earlier layout)"
    moved = [f"evicted {', '.join(record.evicted)}"] if record.evicted else []
    moved += [f"deleted {', '.join(record.deleted)}"] if record.deleted else []
    pods = "; ".join(moved) if moved else "no pod moved"
    kept = len(record.kept) + record.destroyed
    gpus = f"GPUs {gpu_ranges(record.gpus_touched)} touched, {len(record.kept)}/{kept} GIs kept"
    parts = [outcome, pods, gpus]
    if record.left_cordoned or record.left_paused:
        parts.append(
            "left "
            + ", ".join((["cordoned"] if record.left_cordoned else []) + [f"{c} paused" for c in record.left_paused])
        )
    if record.final_state == "failed" and record.gpus_touched:
        parts.append(f"GPUs left: {record.gpus_after}, {record.advertised_after} MIG devices advertised")
    return "; ".join(parts)


def side_by_side(records: Sequence[RunRecord], managers: Sequence[str], descriptions: Mapping[str, str]) -> str:
    summaries = {(s.scenario, s.manager): s for s in summarise(records)}
    last = {(r.scenario, r.manager): r for r in records}
    scenarios = list(dict.fromkeys(r.scenario for r in records))
    lines = [
        "| scenario | " + " | ".join(managers) + " |",
        "|---|" + "---|" * len(managers),
    ]
    for scenario in scenarios:
        cells = []
        for manager in managers:
            key = (scenario, manager)
            cells.append(cell(summaries[key], last[key]) if key in summaries else "not run")
        lines.append(f"| **{scenario}**: {descriptions.get(scenario, '')} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figures(records: Sequence[RunRecord]) -> str:
    """Per scenario and manager: times (p50/p95), runs, and whether every run did the same."""
    lines = [
        "| scenario | manager | runs | success | label to success p50 / p95 s | to advertised p50 s | to failed p50 s"
        " | cordons | operand pauses | operand pods restarted | runs alike |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    last = {(r.scenario, r.manager): r for r in records}
    for s in summarise(records):
        r = last[(s.scenario, s.manager)]
        lines.append(
            f"| {s.scenario} | {s.manager} | {s.runs} | {s.successes} | {_seconds(s.p50_s)} / {_seconds(s.p95_s)}"
            f" | {_seconds(s.advertised_p50_s)} | {_seconds(s.failed_p50_s)} | {r.cordon_episodes}"
            f" | {r.pause_episodes} | {r.operand_restarts} | {'yes' if s.same_facts else 'NO'} |"
        )
    return "\n".join(lines)


def details(records: Sequence[RunRecord]) -> str:
    """Each scenario and manager: its facts, kept GIs with UUIDs, notes, and the last run's timeline."""
    out: list[str] = []
    last = {(r.scenario, r.manager): r for r in records}
    for s in summarise(records):
        r = last[(s.scenario, s.manager)]
        out.append(f"#### {s.scenario}: {s.manager}")
        out.append("")
        out.extend(f"- {fact}" for fact in s.facts)
        out.extend(f"- {key}: {value}" for key, value in r.notes.items())
        if r.kept and r.gpus_touched:
            on_touched = [d for d in r.kept if d.gpu in r.gpus_touched]
            listed = ", ".join(f"GPU {d.gpu} {d.profile}@{d.start} {d.uuid}" for d in on_touched)
            out.append(f"- kept on touched GPUs ({count_text(on_touched)}): {listed or 'none'}")
        out.append("")
        out.append("```")
        out.extend(r.events)
        out.append("```")
        out.append("")
    return "\n".join(out)
