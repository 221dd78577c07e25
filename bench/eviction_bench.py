"""Pods evicted by a layout change, against the fewest any plan could evict.

Figures, not assertions. Each transition of bench.transitions.SUITE starts from a node our planner
built on FakeNvml; pods are then put on its GPU instances in three patterns:
* `every-gi`: one pod on every GI;
* `random`: 0, 1 or 2 pods per GI (seeded);
* `adversarial`: one pod on each GI that a plan keeping the most GIs (no workloads known) destroys,
  so that plan evicts them all, and one on every third other GI.
Columns: `pods` on the node; `evicted` by our plan (workloads known from PodResources);
`max-keep` by a plan that only keeps the most GIs (the old objective); `bound`, the fewest pods
any legal packing evicts, from an exhaustive search over every placement of the target per GPU
(a GPU whose MIG mode changes loses every GI); `destroyed` GIs by our plan; `verified`: executing
our plan on the simulator reached the target.

    python -m bench.eviction_bench
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from bench.simnode import holds
from bench.tables import render_table
from bench.transitions import SUITE, Transition, at_start
from migagent.catalog.model import Placement, ProfileTable
from migagent.layout.desired import DesiredGpu, DesiredNode
from migagent.layout.observed import Observation, ObservedGpu
from migagent.planning import Plan, plan

PATTERNS = ("every-gi", "random", "adversarial")
Workloads = Mapping[tuple[int, Placement], int]


@dataclass(frozen=True)
class EvictionRow:
    name: str
    pattern: str
    pods: int
    evicted: int
    max_keep_evicted: int
    bound: int
    destroyed: int
    verified: bool

    @property
    def at_bound(self) -> bool:
        return self.evicted == self.bound


def evicted_by(the_plan: Plan, workloads: Workloads) -> int:
    return sum(workloads.get((g.gpu, gi.placement), 0) for g in the_plan.gpus for gi in g.destroy)


def _packings(table: ProfileTable, profile_ids: Sequence[int]) -> Iterator[set[tuple[int, Placement]]]:
    """Every non-overlapping choice of legal placements for the multiset (no pruning: a checker)."""
    kinds = sorted(set(profile_ids))
    choices = []
    for kind in kinds:
        profile = table.gi_profile(kind)
        assert profile is not None
        choices.append(itertools.combinations(profile.placements, profile_ids.count(kind)))
    for combo in itertools.product(*choices):
        placements = [p for group in combo for p in group]
        slots = [s for p in placements for s in range(p.start, p.end)]
        if len(slots) == len(set(slots)):
            yield {(kind, p) for kind, group in zip(kinds, combo, strict=True) for p in group}


def _gpu_bound(gpu: ObservedGpu, want: DesiredGpu, workloads: Workloads) -> int:
    pods = {gi.placement: workloads.get((gpu.index, gi.placement), 0) for gi in gpu.gpu_instances}
    if gpu.mig_current != want.mig_enabled or gpu.profiles is None:
        return sum(pods.values())
    best = sum(pods.values())
    cis = {gi.profile_id: gi.ci_profile_ids for gi in want.gpu_instances}
    for targets in _packings(gpu.profiles, [gi.profile_id for gi in want.gpu_instances]):
        kept = (
            gi
            for gi in gpu.gpu_instances
            if (gi.profile_id, gi.placement) in targets and cis.get(gi.profile_id) == gi.ci_profile_ids
        )
        best = min(best, sum(pods.values()) - sum(pods[gi.placement] for gi in kept))
    return best


def lower_bound(before: Observation, desired: DesiredNode, workloads: Workloads) -> int:
    return sum(_gpu_bound(before.gpu(want.index), want, workloads) for want in desired.gpus)


def place_pods(
    before: Observation, desired: DesiredNode, pattern: str, seed: int = 7
) -> dict[tuple[int, Placement], int]:
    gis = [(gpu.index, gi.placement) for gpu in before.gpus for gi in gpu.gpu_instances]
    if pattern == "every-gi":
        return dict.fromkeys(gis, 1)
    if pattern == "random":
        rng = random.Random(seed)
        return {key: rng.choice((0, 1, 2)) for key in gis}
    destroyed = {(g.gpu, gi.placement) for g in plan(before, desired).gpus for gi in g.destroy}
    return {key: 1 if key in destroyed or i % 3 == 0 else 0 for i, key in enumerate(gis)}


def run(transition: Transition, pattern: str) -> EvictionRow:
    with at_start(transition) as (node, before, target):
        workloads = place_pods(before, target, pattern)
        ours = plan(before, target, workloads=workloads)
        node.execute(ours)
        verified = holds(node.observe(), target)
    return EvictionRow(
        name=transition.name,
        pattern=pattern,
        pods=sum(workloads.values()),
        evicted=evicted_by(ours, workloads),
        max_keep_evicted=evicted_by(plan(before, target), workloads),
        bound=lower_bound(before, target, workloads),
        destroyed=sum(len(g.destroy) for g in ours.gpus),
        verified=verified,
    )


def run_suite(transitions: Sequence[Transition] = SUITE) -> list[EvictionRow]:
    return [run(t, pattern) for t in transitions for pattern in PATTERNS]


def main() -> int:
    rows = run_suite()
    print("Pods evicted per layout change (workloads on the GIs), ours vs keep-most-GIs vs the exhaustive bound\n")
    print(
        render_table(
            ["transition", "pattern", "pods", "evicted", "max-keep", "bound", "destroyed", "at-bound", "verified"],
            [
                [r.name, r.pattern, r.pods, r.evicted, r.max_keep_evicted, r.bound, r.destroyed, r.at_bound, r.verified]
                for r in rows
            ],
        )
    )
    at = sum(r.at_bound for r in rows)
    print(
        f"\nat the bound: {at}/{len(rows)}; pods evicted, ours {sum(r.evicted for r in rows)},"
        f" keep-most-GIs {sum(r.max_keep_evicted for r in rows)}, bound {sum(r.bound for r in rows)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
