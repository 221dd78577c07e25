"""Part (b): realistic layout changes on an 8-GPU node, and what each approach tears down.

Each transition starts from a node built by planning and applying its start layout on FakeNvml
(so placements are whatever our planner chose, as on a node it manages). Then:
* ours: the plan's destroyed GIs and reset GPUs, checked by executing the plan on the simulator
  (GI destroy calls plus GIs wiped by resets must equal the plan's count, and the node must end
  up holding the target);
* rebuild: mig-parted's cost on the same start (bench.migparted.rebuild_cost);
* bound: a lower bound no planner can beat: per GPU, existing GIs minus the size of the multiset
  intersection of (GI profile, CI profiles) between existing and desired; resets: Ampere GPUs
  whose MIG mode changes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from bench.layouts import BALANCED, DISABLED, NodeLayout, resolve_node_layout
from bench.migparted import rebuild_cost
from bench.simnode import SimNode, gi_multiset, holds, sim_node, time_plan
from migagent.layout.desired import DesiredNode
from migagent.layout.observed import Observation
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.spec import parse_node_spec

HOPPER_NODE = "8xH100-80GB-SXM"
AMPERE_NODE = "8xA100-40GB"
MIXED_NODE = "4xA100-40GB,4xA30-24GB"


@dataclass(frozen=True)
class Transition:
    name: str
    node: str
    start: NodeLayout
    target: NodeLayout


SUITE: tuple[Transition, ...] = (
    Transition(
        "H100: all-balanced -> all-1g on GPU 3",
        HOPPER_NODE,
        (("all", BALANCED),),
        (("all", BALANCED), ((3,), {"1g.10gb": 7})),
    ),
    Transition(
        "H100: 2x3g -> 3g+2g+1g on GPU 5",
        HOPPER_NODE,
        (("all", {"3g.40gb": 2}),),
        (("all", {"3g.40gb": 2}), ((5,), {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1})),
    ),
    Transition(
        "H100: MIG on GPU 6, off GPU 7",
        HOPPER_NODE,
        (("all", BALANCED), ((6,), DISABLED)),
        (("all", BALANCED), ((7,), DISABLED)),
    ),
    Transition(
        "A100: MIG on GPU 6, off GPU 7",
        AMPERE_NODE,
        (("all", BALANCED), ((6,), DISABLED)),
        (("all", BALANCED), ((7,), DISABLED)),
    ),
    Transition("H100: all-balanced -> all-balanced", HOPPER_NODE, (("all", BALANCED),), (("all", BALANCED),)),
    Transition(
        "H100: 7x1g -> 1g.20gb x3 + 1g x1 on GPU 2",
        HOPPER_NODE,
        (("all", {"1g.10gb": 7}),),
        (("all", {"1g.10gb": 7}), ((2,), {"1g.20gb": 3, "1g.10gb": 1})),
    ),
    Transition(
        "A100: all-balanced -> 4g+3g on GPUs 0-1",
        AMPERE_NODE,
        (("all", BALANCED),),
        (("all", BALANCED), ((0, 1), {"4g.20gb": 1, "3g.20gb": 1})),
    ),
    Transition(
        "H100: all-balanced -> 2x3g on GPU 4",
        HOPPER_NODE,
        (("all", BALANCED),),
        (("all", BALANCED), ((4,), {"3g.40gb": 2})),
    ),
    Transition(
        "A100+A30: A30s all-1g, GPU 0 2x3g",
        MIXED_NODE,
        (("all", BALANCED),),
        (("all", BALANCED), ((4, 5, 6, 7), {"1g.6gb": 4}), ((0,), {"3g.20gb": 2})),
    ),
    Transition("A100: all-disabled -> all-balanced", AMPERE_NODE, (("all", DISABLED),), (("all", BALANCED),)),
)


@dataclass(frozen=True)
class TransitionRow:
    name: str
    gpus: int
    ours_destroys: int
    ours_resets: int
    rebuild_destroys: int
    rebuild_resets: int
    bound_destroys: int
    bound_resets: int
    verified: bool  # executing our plan destroyed/reset exactly that and reached the target
    plan_seconds: tuple[float, ...]  # the transition's plan, timed on the pure planner

    @property
    def ours_at_bound(self) -> bool:
        return (self.ours_destroys, self.ours_resets) == (self.bound_destroys, self.bound_resets)


def lower_bound(before: Observation, desired: DesiredNode) -> tuple[int, int]:
    destroys = resets = 0
    for want in desired.gpus:
        gpu = before.gpu(want.index)
        existing = gi_multiset(gpu.gpu_instances)
        wanted = gi_multiset(want.gpu_instances) if want.mig_enabled else gi_multiset(())
        destroys += existing.total() - (existing & wanted).total()
        resets += gpu.mode_change_needs_reset and gpu.mig_current != want.mig_enabled
    return destroys, resets


@contextmanager
def at_start(transition: Transition) -> Iterator[tuple[SimNode, Observation, DesiredNode]]:
    """A simulated node of the transition's GPUs in its start layout: (node, what it holds, the target)."""
    models = parse_node_spec(transition.node)
    start = resolve_node_layout(transition.start, models, name="start")
    target = resolve_node_layout(transition.target, models, name="target")
    with sim_node(FakeNvml.from_models(models, mig_enabled=False)) as node:
        node.apply(start)
        before = node.observe()
        if not holds(before, start):  # pragma: no cover - the planner's own end-to-end guarantee
            raise AssertionError(f"{transition.name}: the start layout was not reached")
        yield node, before, target


def run_transition(transition: Transition, *, plan_repeats: int = 1) -> TransitionRow:
    with at_start(transition) as (node, before, target):
        the_plan, report = node.apply(target)
        after = node.observe()
    destroys = sum(len(g.destroy) for g in the_plan.gpus)
    resets = sum(g.reset for g in the_plan.gpus)
    rebuild = rebuild_cost(before, target)
    bound_destroys, bound_resets = lower_bound(before, target)
    return TransitionRow(
        name=transition.name,
        gpus=len(before.gpus),
        ours_destroys=destroys,
        ours_resets=resets,
        rebuild_destroys=rebuild.gis_destroyed,
        rebuild_resets=rebuild.gpus_reset,
        bound_destroys=bound_destroys,
        bound_resets=bound_resets,
        verified=holds(after, target) and (report.gis_lost, report.resets) == (destroys, resets),
        plan_seconds=tuple(time_plan(before, target, plan_repeats)),
    )


def run_suite(transitions: Sequence[Transition] = SUITE, *, plan_repeats: int = 1) -> list[TransitionRow]:
    return [run_transition(t, plan_repeats=plan_repeats) for t in transitions]
