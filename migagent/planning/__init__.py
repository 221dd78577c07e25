"""Pure planning: from an observation and a desired layout to ordered, idempotent steps (no I/O)."""

from __future__ import annotations

from migagent.planning.model import GpuPlan, Plan
from migagent.planning.offline import empty_observation
from migagent.planning.planner import plan
from migagent.planning.render import plan_to_json, render_plan
from migagent.planning.solver import enumerate_fitting_multisets, fits, solve
from migagent.planning.steps import Step, StepKind

__all__ = [
    "GpuPlan",
    "Plan",
    "Step",
    "StepKind",
    "empty_observation",
    "enumerate_fitting_multisets",
    "fits",
    "plan",
    "plan_to_json",
    "render_plan",
    "solve",
]
