"""What changing one node to a layout would do, predicted from its agent's report and the planner.

The same planner the agent runs, with the same pods per GPU instance, so the GIs it destroys and
the pods it evicts are the agent's own choice: a pod is evicted when it holds a GI the plan
destroys, or any GI of a GPU that is reset or switches MIG mode (runtime drain scope). The
capacity is what the device plugin advertises under the mixed strategy, before and after.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar, cast

from migagent.errors import MigAgentError
from migagent.layout.desired import DesiredGpu, DesiredNode
from migagent.layout.observed import Observation, ObservedGpu
from migagent.layout.profile import MigProfile, ci_profile_name
from migagent.layout.resolve import identity_of, resolve_config
from migagent.layout.spec import LayoutFile
from migagent.layout.strategy import GpuDevices, MigStrategy, advertised_counts, desired_devices
from migagent.planning import GpuPlan, plan
from migagent.planning.planner import GiWorkloads
from migagent.rollout.reported import ReportedNode


@dataclass(frozen=True)
class NodeImpact:
    """One node's predicted change; `problem` set (and the rest empty) when it cannot be planned."""

    node: str
    gpus: int
    """Every GPU of the node: all of them are out of service (cordoned) while it changes."""
    gpus_changed: tuple[int, ...] = ()
    gis_kept: int = 0
    gis_destroyed: int = 0
    gis_created: int = 0
    resets: int = 0
    evicts: tuple[str, ...] = ()
    """Pods (`namespace/name`) the change evicts, sorted."""
    capacity_before: Mapping[str, int] = field(default_factory=dict, hash=False)
    capacity_after: Mapping[str, int] = field(default_factory=dict, hash=False)
    problem: str = ""
    """Why this node cannot be changed: no agent report, or the layout does not fit (one line)."""
    reported_pods: tuple[str, ...] = ()
    """Every pod the agent's report places on a GI (evicted or not)."""
    unreported: tuple[str, ...] = ()
    """GPU pods on the node now that the agent's last report does not place (started since it): which
    device they hold is unknown, so a change that touches any GPU counts them as evicted, as the
    agent's drain does for a pod it cannot place."""

    @property
    def plannable(self) -> bool:
        return not self.problem

    @property
    def changes(self) -> bool:
        return bool(self.gpus_changed)

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "gpus": self.gpus,
            "gpus_changed": list(self.gpus_changed),
            "gis_kept": self.gis_kept,
            "gis_destroyed": self.gis_destroyed,
            "gis_created": self.gis_created,
            "resets": self.resets,
            "evicts": list(self.evicts),
            "capacity_before": dict(self.capacity_before),
            "capacity_after": dict(self.capacity_after),
            "problem": self.problem,
            "unreported_pods": list(self.unreported),
        }


def _devices(gpu: ObservedGpu) -> GpuDevices:
    table = gpu.profiles
    profiles: list[MigProfile] = []
    for gi in gpu.gpu_instances if gpu.mig_current and table is not None else ():
        gi_profile = table.gi_profile(gi.profile_id) if table is not None else None
        for ci in gi.compute_instances:
            ci_profile = gi_profile.ci_profile(ci.profile_id) if gi_profile is not None else None
            if table is not None and gi_profile is not None and ci_profile is not None:
                profiles.append(ci_profile_name(gi_profile, ci_profile, table))
    return GpuDevices(gpu.index, gpu.mig_current, tuple(profiles))


def capacity(observation: Observation) -> dict[str, int]:
    """`nvidia.com/mig-*` (and `nvidia.com/gpu` for GPUs with MIG off) a mixed-strategy plugin advertises."""
    return advertised_counts(MigStrategy.MIXED, [_devices(gpu) for gpu in observation.gpus])


def predict(node: str, reported: ReportedNode, layout: LayoutFile, name: str) -> NodeImpact:
    """The change `name` makes on `node`; a layout that does not resolve or fit is a `problem`. Across a
    fleet most nodes are alike: the layout resolved and the capacities are worked out once per shape of
    node, each GPU's plan once per GPU alike with the same pods per instance (the planner plans GPUs one
    by one); only the pods evicted are the node's own."""
    observation = reported.observation
    shapes, loads, before = _node_shape(reported)
    try:
        desired, after = _remembered(("layout", id(layout), name, shapes), (layout,),
                                     partial(_resolved, layout, name, observation))
        gpu_plans = _gpu_plans(observation, desired, reported.workloads(), loads)
    except MigAgentError as error:
        return NodeImpact(node=node, gpus=len(observation.gpus), capacity_before=before, problem=str(error))
    evicts: set[str] = set()
    changed: list[int] = []
    for gpu_plan in gpu_plans:
        if gpu_plan.is_unchanged:
            continue
        changed.append(gpu_plan.gpu)
        if gpu_plan.reset or gpu_plan.mode_change is not None:
            evicts.update(reported.pods_on_gpu(gpu_plan.gpu))
        for gi in gpu_plan.destroy:
            evicts.update(reported.pods.get((gpu_plan.gpu, gi.placement), ()))
    return NodeImpact(
        node=node,
        gpus=len(observation.gpus),
        gpus_changed=tuple(changed),
        gis_kept=sum(len(g.keep) for g in gpu_plans),
        gis_destroyed=sum(len(g.destroy) for g in gpu_plans),
        gis_created=sum(len(g.create) for g in gpu_plans),
        resets=sum(1 for g in gpu_plans if g.reset),
        evicts=tuple(sorted(evicts)),
        reported_pods=tuple(sorted({pod for held in reported.pods.values() for pod in held})),
        capacity_before=before,
        capacity_after=after,
    )


def _resolved(layout: LayoutFile, name: str, observation: Observation) -> tuple[DesiredNode, dict[str, int]]:
    desired = resolve_config(layout, name, [identity_of(gpu) for gpu in observation.gpus])
    return desired, advertised_counts(MigStrategy.MIXED, [  # each device named by its own profile, as before
        replace(desired_devices(gpu, want), patterns=()) if (want := desired.gpu(gpu.index)) else _devices(gpu)
        for gpu in observation.gpus
    ])


_T = TypeVar("_T")
_KEPT = 65536
_REMEMBERED: dict[tuple[object, ...], tuple[tuple[object, ...], object]] = {}
_SHAPES: dict[tuple[object, ...], tuple[int, object]] = {}
_LAST: list[tuple[ReportedNode, tuple[int, ...], tuple[int, ...], dict[str, int]]] = []


def _remembered(key: tuple[object, ...], keep: tuple[object, ...], compute: Callable[[], _T]) -> _T:
    """`compute()`, or what it gave (or raised) for `key` before. The objects whose ids `key` holds are kept
    with it: no other object can take their ids meanwhile."""
    if key not in _REMEMBERED:
        try:
            value: object = compute()
        except MigAgentError as error:
            value = error
        _REMEMBERED[key] = (keep, value)
    value = _REMEMBERED[key][1]
    if isinstance(value, MigAgentError):
        raise type(value)(*value.args)
    return cast(_T, value)


def _node_shape(reported: ReportedNode) -> tuple[tuple[int, ...], tuple[int, ...], dict[str, int]]:
    """Per GPU a number for what its layouts depend on (uuid, bus id, processes aside), one for that and
    the pods per instance (what its plan depends on); the capacity now. For the node priced last: its
    layouts come one after another."""
    if _LAST and _LAST[0][0] is reported:
        return _LAST[0][1:]
    if len(_SHAPES) >= _KEPT or len(_REMEMBERED) >= 4 * _KEPT:
        _SHAPES.clear()
        _REMEMBERED.clear()  # its keys hold the numbers, which start again
    gpus, workloads = reported.observation.gpus, reported.workloads()
    shapes = tuple(_SHAPES.setdefault(
        (g.index, g.name, g.pci_device_id, g.pci_subsystem_id, g.mig_capable, g.mig_current, g.mig_pending,
         g.mode_change_needs_reset, g.gpu_instances, id(g.profiles)), (len(_SHAPES), g.profiles))[0] for g in gpus)
    loads = tuple(_SHAPES.setdefault((shape, *sorted((p, n) for (i, p), n in workloads.items() if i == g.index)),
                                     (len(_SHAPES), None))[0] for shape, g in zip(shapes, gpus, strict=True))
    before = _remembered(("before", shapes), (), partial(capacity, reported.observation))
    _LAST[:] = [(reported, shapes, loads, before)]
    return shapes, loads, before


def _gpu_plans(
    observation: Observation, desired: DesiredNode, workloads: GiWorkloads, loads: tuple[int, ...]
) -> tuple[GpuPlan, ...]:
    """`plan(observation, desired, workloads=workloads).gpus`, one GPU at a time (see `predict`)."""
    present = {gpu.index: (gpu, load) for gpu, load in zip(observation.gpus, loads, strict=True)}
    indices = [want.index for want in desired.gpus]
    if len(set(indices)) < len(indices) or not set(indices) <= present.keys():
        return plan(observation, desired, workloads=workloads).gpus  # refused, in the planner's words
    return tuple(_remembered(("plan", present[want.index][1], id(want)), (want,),
                             partial(_plan_gpu, present[want.index][0], want, workloads))
                 for want in sorted(desired.gpus, key=lambda g: g.index))


def _plan_gpu(gpu: ObservedGpu, want: DesiredGpu, workloads: GiWorkloads) -> GpuPlan:
    return plan(Observation((gpu,)), DesiredNode((want,)), workloads=workloads).gpus[0]


def with_pods_now(impact: NodeImpact, gpu_pods: Iterable[str]) -> NodeImpact:
    """The prediction, given the GPU pods on the node now: those the report does not place are evicted
    too when the change touches any GPU (conservative: their device is unknown)."""
    unknown = tuple(sorted(set(gpu_pods) - set(impact.reported_pods)))
    if not unknown or not impact.changes:
        return replace(impact, unreported=unknown)
    return replace(impact, unreported=unknown, evicts=tuple(sorted({*impact.evicts, *unknown})))


def unreported(node: str, problem: str) -> NodeImpact:
    return NodeImpact(node=node, gpus=0, problem=problem)


def total_capacity(maps: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for counts in maps:
        total.update(counts)
    return dict(sorted(total.items()))
