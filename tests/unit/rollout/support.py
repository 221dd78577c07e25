"""Values for the pure rollout tests: an agent's report of H100 nodes, built as the agent builds it."""

from __future__ import annotations

from collections.abc import Mapping

from migagent.attempt.report.status import observed_annotation
from migagent.catalog import model_by_key
from migagent.catalog.model import Placement
from migagent.layout.observed import Observation, ObservedCi, ObservedGi
from migagent.layout.parse import parse_layout
from migagent.layout.resolve import identity_of, resolve_config
from migagent.layout.spec import LayoutFile
from migagent.planning import empty_observation, plan
from migagent_sim.doubles.layouts import ALL_1G_AND_BALANCED

H100 = model_by_key("H100-80GB-SXM")
LAYOUTS: LayoutFile = parse_layout(
    ALL_1G_AND_BALANCED
    + """\
  all-disabled:
    - devices: all
      mig-enabled: false
      mig-devices: {}
  too-many-3g:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 3}
""",
    source="test layouts",
)


def observation(layout: str, gpus: int = 2) -> Observation:
    """GPUs in `layout`, as the planner would have created it from empty."""
    empty = empty_observation([H100] * gpus)
    desired = resolve_config(LAYOUTS, layout, [identity_of(gpu) for gpu in empty.gpus])
    steps = plan(empty, desired)
    gpus_out = []
    for gpu, gpu_plan in zip(empty.gpus, steps.gpus, strict=True):
        gis = tuple(
            ObservedGi(
                id=index, profile_id=gi.profile_id, placement=placement,
                compute_instances=tuple(
                    ObservedCi(id=c, profile_id=ci, placement=Placement(c, 1), uuid=f"MIG-{gpu.index}-{index}-{c}")
                    for c, ci in enumerate(gi.ci_profile_ids)
                ),
            )
            for index, (gi, placement) in enumerate(gpu_plan.create)
        )
        gpus_out.append(gpu.__class__(**{**gpu.__dict__, "gpu_instances": gis}))
    return Observation(tuple(gpus_out))


def report(layout: str, pods: Mapping[tuple[int, int], list[str]] | None = None, gpus: int = 2) -> str:
    """The observed annotation for GPUs in `layout`, with pods by (GPU index, GI start slot)."""
    seen = observation(layout, gpus)
    by_slot = pods or {}
    held = {
        (gpu.index, gi.placement): by_slot[(gpu.index, gi.placement.start)]
        for gpu in seen.gpus for gi in gpu.gpu_instances
        if (gpu.index, gi.placement.start) in by_slot
    }
    return observed_annotation(seen, held)
