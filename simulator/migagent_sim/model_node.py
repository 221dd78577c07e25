"""A GPU node as a model, for the demand bench and the autopilot's fast tests: its GPUs' GPU instances
(one full compute instance each, the mixed strategy's devices), the pod holding each, and its agent
reduced to what the pool sees: a relabel cordons the node, evicts the pods on the GPU instances the
planner destroys, and after the reconfiguration time the node holds the new layout and says so.

The planner is the agent's own (`planning.plan`, with the pods per GPU instance), and the Node the
pool shows is written as the agent writes it (`migagent.io/observed` with the pods per GI, the
desired annotation, the state label and condition, allocatable), so the advice, the rollout and the
autopilot read it through their production code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from migagent.attempt.report.status import desired_annotation, observed_annotation
from migagent.catalog import GpuModel, model_by_key
from migagent.catalog.model import Placement
from migagent.errors import MigAgentError
from migagent.layout.observed import Observation, ObservedCi, ObservedGi, ObservedGpu
from migagent.layout.profile import gi_profile_name
from migagent.layout.resolve import identity_of, resolve_config
from migagent.layout.spec import LayoutFile
from migagent.layout.strategy import mig_resource_name
from migagent.node.names import (
    CONDITION_TYPE,
    DESIRED_ANNOTATION,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    OBSERVED_ANNOTATION,
    ConditionReason,
)
from migagent.node.port import NodeCondition, NodeView
from migagent.planning import plan
from migagent.rollout.impact import capacity

JsonDict = dict[str, object]


@dataclass
class ModelGi:
    profile_id: int
    placement: Placement
    pod: str | None = None


@dataclass
class ModelGpu:
    index: int
    mig: bool = True
    gis: list[ModelGi] = field(default_factory=list)


@dataclass
class ModelNode:
    name: str
    model: GpuModel
    gpus: list[ModelGpu]
    labels: dict[str, str] = field(default_factory=dict)
    layout: str | None = None
    """The layout the GPUs hold (what the agent last applied)."""
    target: str | None = None
    """While a change runs: the layout it goes to."""
    done_at: float | None = None
    version: int = 1
    failed: str = ""
    _view: NodeView | None = field(default=None, repr=False, compare=False)

    @classmethod
    def empty(cls, name: str, model_key: str, gpus: int, labels: Mapping[str, str] | None = None) -> ModelNode:
        return cls(name, model_by_key(model_key), [ModelGpu(i) for i in range(gpus)], dict(labels or {}))

    # --- what the agent reports ---------------------------------------------------------------------

    def observation(self) -> Observation:
        table = self.model.profiles
        gpus = []
        for gpu in self.gpus:
            gis = []
            for number, gi in enumerate(sorted(gpu.gis, key=lambda g: g.placement)):
                profile = table.gi_profile(gi.profile_id)
                assert profile is not None
                ci = ObservedCi(0, profile.default_ci.id, Placement(0, profile.slices),
                                f"MIG-{self.name}-{gpu.index}-{gi.placement.start}")
                gis.append(ObservedGi(number, gi.profile_id, gi.placement, (ci,)))
            gpus.append(ObservedGpu(
                index=gpu.index, uuid=f"GPU-{self.name}-{gpu.index}", name=self.model.name, pci_bus_id="",
                pci_device_id=self.model.primary_pci_device_id, mig_capable=True, mig_current=gpu.mig,
                mig_pending=gpu.mig, gpu_instances=tuple(gis), profiles=table,
                mode_change_needs_reset=self.model.mode_change_needs_reset,
            ))
        return Observation(tuple(gpus))

    def pods_by_gi(self) -> dict[tuple[int, Placement], list[str]]:
        return {(gpu.index, gi.placement): [gi.pod] for gpu in self.gpus for gi in gpu.gis if gi.pod}

    @property
    def changing(self) -> bool:
        return self.done_at is not None

    def view(self) -> NodeView:
        """The Node as its agent and kubelet last wrote it (built again only when the node changed)."""
        cached = self._view
        if cached is not None and cached.resource_version == str(self.version):
            return cached
        self._view = self._build_view()
        return self._view

    def _build_view(self) -> NodeView:
        settled = not self.changing and not self.failed
        labels = dict(self.labels)
        label = self.target if self.changing else self.layout
        if label is not None:
            labels[MIG_CONFIG_LABEL] = label
            labels[MIG_CONFIG_STATE_LABEL] = "success" if settled else "failed" if self.failed else "pending"
        annotations = {OBSERVED_ANNOTATION: observed_annotation(self.observation(), self.pods_by_gi())}
        if label is not None and settled:
            annotations[DESIRED_ANNOTATION] = desired_annotation(label, "model")
        reason = ConditionReason.APPLIED if settled else ConditionReason.RECONFIGURING
        condition = NodeCondition(CONDITION_TYPE, "True" if settled else "False", str(reason))
        return NodeView(
            name=self.name, uid=f"uid-{self.name}", resource_version=str(self.version), labels=labels,
            annotations=annotations, unschedulable=self.changing,
            allocatable={} if self.changing else capacity(self.observation()), conditions=(condition,),
        )

    # --- devices --------------------------------------------------------------------------------------

    def resource_of(self, gi: ModelGi) -> str:
        """The mixed strategy's resource for the GI's one full compute instance."""
        table = self.model.profiles
        profile = table.gi_profile(gi.profile_id)
        assert profile is not None
        return mig_resource_name(gi_profile_name(profile, table))

    def free_by_resource(self) -> dict[str, list[ModelGi]]:
        """Resource -> the GIs no pod holds (last in the list first to go), while the node is schedulable."""
        free: dict[str, list[ModelGi]] = {}
        if self.changing:
            return free
        names: dict[int, str] = {}
        for gpu in reversed(self.gpus):
            for gi in sorted(gpu.gis, key=lambda g: g.placement, reverse=True) if gpu.mig else ():
                if gi.pod is None:
                    if gi.profile_id not in names:
                        names[gi.profile_id] = self.resource_of(gi)
                    free.setdefault(names[gi.profile_id], []).append(gi)
        return free

    # --- the agent ------------------------------------------------------------------------------------

    def start_change(self, layout: LayoutFile, name: str, *, done_at: float) -> tuple[list[str], int]:
        """Relabelled: plan from what the node holds, evict the pods on what the plan destroys and hold
        the node until `done_at`; returns the pods evicted and the GPUs changed. A layout that does not
        fit fails the node (its state `failed`) and changes nothing."""
        observation = self.observation()
        try:
            desired = resolve_config(layout, name, [identity_of(gpu) for gpu in observation.gpus])
            steps = plan(observation, desired, workloads=dict.fromkeys(self.pods_by_gi(), 1))
        except MigAgentError as error:  # the agent reports failed and changes nothing
            self.failed = str(error)
            self.target = name
            self.version += 1
            return [], 0
        evicted: list[str] = []
        for gpu_plan in steps.gpus:
            gpu = self.gpus[gpu_plan.gpu]
            destroyed = {gi.placement for gi in gpu_plan.destroy}
            if gpu_plan.mode_change is not None or gpu_plan.reset:
                destroyed = {gi.placement for gi in gpu.gis}
            for gi in gpu.gis:
                if gi.placement in destroyed and gi.pod is not None:
                    evicted.append(gi.pod)
                    gi.pod = None
            gpu.gis = [gi for gi in gpu.gis if gi.placement not in destroyed]
            if gpu_plan.mode_change is not None:
                gpu.mig = gpu_plan.mode_change
            gpu.gis += [ModelGi(want.profile_id, placement) for want, placement in gpu_plan.create]
        self.target, self.done_at, self.failed = name, done_at, ""
        self.version += 1
        return evicted, sum(1 for gpu_plan in steps.gpus if not gpu_plan.is_unchanged)

    def finish_change(self, now: float) -> bool:
        if self.done_at is None or now < self.done_at:
            return False
        self.layout, self.target, self.done_at = self.target, None, None
        self.version += 1
        return True
