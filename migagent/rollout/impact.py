"""What changing one node to a layout would do, predicted from its agent's report and the planner.

The same planner the agent runs, with the same pods per GPU instance, so the GIs it destroys and
the pods it evicts are the agent's own choice: a pod is evicted when it holds a GI the plan
destroys, or any GI of a GPU that is reset or switches MIG mode (runtime drain scope). The
capacity is what the device plugin advertises under the mixed strategy, before and after.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from migagent.errors import MigAgentError
from migagent.layout.observed import Observation, ObservedGpu
from migagent.layout.profile import MigProfile, ci_profile_name
from migagent.layout.resolve import identity_of, resolve_config
from migagent.layout.spec import LayoutFile
from migagent.layout.strategy import GpuDevices, MigStrategy, advertised_counts, desired_devices
from migagent.planning import plan
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
    """The change `name` makes on `node`; a layout that does not resolve or fit is a `problem`."""
    observation = reported.observation
    before = capacity(observation)
    try:
        desired = resolve_config(layout, name, [identity_of(gpu) for gpu in observation.gpus])
        steps = plan(observation, desired, workloads=reported.workloads())
    except MigAgentError as error:
        return NodeImpact(node=node, gpus=len(observation.gpus), capacity_before=before, problem=str(error))
    evicts: set[str] = set()
    changed: list[int] = []
    for gpu_plan in steps.gpus:
        if gpu_plan.is_unchanged:
            continue
        changed.append(gpu_plan.gpu)
        if gpu_plan.reset or gpu_plan.mode_change is not None:
            evicts.update(reported.pods_on_gpu(gpu_plan.gpu))
        for gi in gpu_plan.destroy:
            evicts.update(reported.pods.get((gpu_plan.gpu, gi.placement), ()))
    after_devices = [  # each device named by its own profile, as `_devices` names them before
        replace(desired_devices(gpu, want), patterns=()) if (want := desired.gpu(gpu.index)) else _devices(gpu)
        for gpu in observation.gpus
    ]
    return NodeImpact(
        node=node,
        gpus=len(observation.gpus),
        gpus_changed=tuple(changed),
        gis_kept=sum(len(g.keep) for g in steps.gpus),
        gis_destroyed=sum(len(g.destroy) for g in steps.gpus),
        gis_created=sum(len(g.create) for g in steps.gpus),
        resets=sum(1 for g in steps.gpus if g.reset),
        evicts=tuple(sorted(evicts)),
        reported_pods=tuple(sorted({pod for held in reported.pods.values() for pod in held})),
        capacity_before=before,
        capacity_after=advertised_counts(MigStrategy.MIXED, after_devices),
    )


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
