"""Plans for people: a table per group of GPUs that change alike, their steps, and the `--output json` form.

Everything is derived from the plan plus the observation it was made from (for GPU names and
profile tables), in plan order, so the same plan always renders the same text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from migagent.catalog.model import Placement, ProfileTable
from migagent.layout.gpus import gpu_ranges
from migagent.layout.observed import Observation, ObservedGi, ObservedGpu
from migagent.planning.model import GpuPlan, Plan
from migagent.planning.naming import ci_name, describe_gi, gi_name, step_text
from migagent.planning.steps import Step, StepKind


def _gpu(observation: Observation, index: int) -> ObservedGpu | None:
    return next((g for g in observation.gpus if g.index == index), None)


def _label(observation: Observation, index: int) -> str:
    gpu = _gpu(observation, index)
    return f"GPU {index}" if gpu is None else f"GPU {index} ({gpu.name})"


class _Names:
    """Profile names for one GPU, falling back to ids when its table is unknown."""

    def __init__(self, table: ProfileTable | None) -> None:
        self.table = table

    def gi(self, profile_id: int | None, ci_profile_ids: tuple[int, ...] | None = None) -> str:
        if profile_id is None:
            return "-"
        if self.table is None:
            return f"GI profile {profile_id}"
        if ci_profile_ids is None:
            return gi_name(self.table, profile_id)
        return describe_gi(self.table, profile_id, ci_profile_ids)

    def ci(self, gi_profile_id: int | None, ci_profile_id: int) -> str:
        if self.table is None or gi_profile_id is None:
            return f"CI profile {ci_profile_id}"
        return ci_name(self.table, self.table.gi_profile(gi_profile_id), ci_profile_id)

    def cis(self, gi_profile_id: int, cis: list[tuple[int, Placement]]) -> str:
        return ", ".join(f"{self.ci(gi_profile_id, ci)}@{p}" for ci, p in sorted(cis, key=lambda c: c[1])) or "-"


def _observed_row(action: str, gi: ObservedGi, names: _Names) -> tuple[str, ...]:
    cis = names.cis(gi.profile_id, [(ci.profile_id, ci.placement) for ci in gi.compute_instances])
    busy = sum(len(ci.processes) for ci in gi.compute_instances)
    note = f"{busy} process(es)" if busy else ""
    return (action, names.gi(gi.profile_id, gi.ci_profile_ids), str(gi.placement), f"GI {gi.id}", cis, note)


def _rows(gpu_plan: GpuPlan, steps: tuple[Step, ...], names: _Names) -> list[tuple[str, ...]]:
    rows = [_observed_row("keep", gi, names) for gi in gpu_plan.keep]
    rows += [_observed_row("destroy", gi, names) for gi in gpu_plan.destroy]
    for desired, placement in gpu_plan.create:
        cis = [
            (s.ci_profile_id, s.ci_placement)
            for s in steps
            if s.kind is StepKind.CREATE_CI and s.gi_placement == placement and s.ci_profile_id is not None
            if s.ci_placement is not None
        ]
        gi = names.gi(desired.profile_id, desired.ci_profile_ids)
        rows.append(("create", gi, str(placement), "", names.cis(desired.profile_id, cis), ""))
    return rows


_HEADER = ("action", "profile", "placement", "id", "compute instances", "")


def _table(rows: list[tuple[str, ...]], *, header: tuple[str, ...] = _HEADER) -> list[str]:
    rows = [header, *rows]
    widths = [max(len(row[col]) for row in rows) for col in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _mode_lines(gpu_plan: GpuPlan) -> list[str]:
    lines = []
    if gpu_plan.mode_change is not None:
        lines.append(f"  mode    set MIG {'on' if gpu_plan.mode_change else 'off'}")
    if gpu_plan.reset:
        lines.append("  reset   GPU reset to activate the pending MIG mode")
    return lines


def _summary(gpu_plan: GpuPlan) -> str:
    if gpu_plan.is_unchanged:
        return f"no change ({len(gpu_plan.keep)} GI(s) kept)"
    return f"keep {len(gpu_plan.keep)}, destroy {len(gpu_plan.destroy)}, create {len(gpu_plan.create)} GI(s)"


def describe_step(step: Step, observation: Observation) -> str:
    """`GPU 3: destroy 1g.10gb at slot 2`: the step with the GPU's profile names and placements."""
    gpu = _gpu(observation, step.gpu)
    return step_text(step, None if gpu is None else gpu.profiles)


@dataclass(frozen=True)
class _GpuBlock:
    """What render_plan prints for one GPU, apart from its index and NVML instance ids: GPUs whose
    blocks are equal are printed once (`GPUs 0-7: ...`)."""

    name: str
    summary: str
    modes: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]  # without the id column
    steps: tuple[str, ...]  # without the "GPU n: " prefix


def _block(gpu_plan: GpuPlan, plan: Plan, observation: Observation) -> tuple[_GpuBlock, list[tuple[str, ...]]]:
    gpu = _gpu(observation, gpu_plan.gpu)
    names = _Names(None if gpu is None else gpu.profiles)
    rows = _rows(gpu_plan, plan.steps_for(gpu_plan.gpu), names)
    prefix = f"GPU {gpu_plan.gpu}: "
    steps = tuple(describe_step(step, observation).removeprefix(prefix) for step in plan.steps_for(gpu_plan.gpu))
    block = _GpuBlock(
        name="" if gpu is None else gpu.name,
        summary=_summary(gpu_plan),
        modes=tuple(_mode_lines(gpu_plan)),
        rows=tuple(row[:3] + row[4:] for row in rows),
        steps=steps,
    )
    return block, rows


def render_plan(plan: Plan, observation: Observation) -> str:
    """The plan as text: per group of GPUs that change alike, a keep/destroy/create table and the
    steps on each; the apply runs them across the GPUs in this order, kind by kind (`-o json`
    lists them one by one)."""
    groups: dict[_GpuBlock, list[int]] = {}
    full_rows: dict[_GpuBlock, list[tuple[str, ...]]] = {}
    for gpu_plan in plan.gpus:
        block, rows = _block(gpu_plan, plan, observation)
        groups.setdefault(block, []).append(gpu_plan.gpu)
        full_rows.setdefault(block, rows)
    lines: list[str] = []
    for block, indices in groups.items():
        many = len(indices) > 1
        label = f"GPUs {gpu_ranges(indices)}" if many else f"GPU {indices[0]}"
        name = f" ({block.name})" if block.name else ""
        lines.append(f"{label}{name}{', each' if many else ''}: {block.summary}")
        lines += block.modes
        if block.rows:
            # One GPU: with its NVML instance ids; several: those differ per GPU and are left out.
            lines += _table(list(block.rows), header=_HEADER[:3] + _HEADER[4:]) if many else _table(full_rows[block])
        if block.steps:
            lines.append(f"  steps{' on each' if many else ''}:")
            width = len(str(len(block.steps)))
            lines += [f"    {n:>{width}}. {text}" for n, text in enumerate(block.steps, 1)]
    if not plan.gpus:
        lines.append("no GPU selected")
    lines.append(f"{len(plan.steps)} step(s) in all")
    return "\n".join(lines) + "\n"


def plan_to_json(plan: Plan, observation: Observation) -> dict[str, Any]:
    """`plan.to_json()` with names added for readers; `Plan.from_json` still loads it."""
    data = plan.to_json()
    data["is_empty"] = plan.is_empty
    for entry, gpu_plan in zip(data["gpus"], plan.gpus, strict=True):
        gpu = _gpu(observation, gpu_plan.gpu)
        names = _Names(None if gpu is None else gpu.profiles)
        entry["name"] = None if gpu is None else gpu.name
        entry["uuid"] = None if gpu is None else gpu.uuid
        for key, gis in (("keep", gpu_plan.keep), ("destroy", gpu_plan.destroy)):
            for gi_json, gi in zip(entry[key], gis, strict=True):
                gi_json["profile"] = names.gi(gi.profile_id, gi.ci_profile_ids)
        for create_json, (desired, _) in zip(entry["create"], gpu_plan.create, strict=True):
            create_json["profile"] = names.gi(desired.profile_id, desired.ci_profile_ids)
    for step_json, step in zip(data["steps"], plan.steps, strict=True):
        step_json["description"] = describe_step(step, observation)
    return data
