"""The plan as a value: per-GPU decisions plus the ordered steps, with an exact JSON round trip.

The JSON form is what a crashed apply resumes from and what `--output json` prints, so every
field of the observed GIs (ids, CI uuids, processes) survives `Plan.from_json(plan.to_json())`.
Readers ignore keys they do not know, so decorated output (render.plan_to_json) loads too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from migagent.catalog.model import Placement
from migagent.layout.desired import DesiredGi
from migagent.layout.observed import ObservedCi, ObservedGi, ObservedProcess
from migagent.planning.steps import Step


def placement_to_json(placement: Placement) -> list[int]:
    return [placement.start, placement.size]


def placement_from_json(data: Any) -> Placement:
    return Placement(int(data[0]), int(data[1]))


def _ci_to_json(ci: ObservedCi) -> dict[str, Any]:
    return {
        "id": ci.id,
        "profile_id": ci.profile_id,
        "placement": placement_to_json(ci.placement),
        "uuid": ci.uuid,
        "processes": [{"pid": p.pid, "used_memory_bytes": p.used_memory_bytes} for p in ci.processes],
    }


def _ci_from_json(data: dict[str, Any]) -> ObservedCi:
    return ObservedCi(
        id=int(data["id"]),
        profile_id=int(data["profile_id"]),
        placement=placement_from_json(data["placement"]),
        uuid=str(data["uuid"]),
        processes=tuple(
            ObservedProcess(pid=int(p["pid"]), used_memory_bytes=int(p["used_memory_bytes"]))
            for p in data.get("processes", ())
        ),
    )


def observed_gi_to_json(gi: ObservedGi) -> dict[str, Any]:
    return {
        "id": gi.id,
        "profile_id": gi.profile_id,
        "placement": placement_to_json(gi.placement),
        "compute_instances": [_ci_to_json(ci) for ci in gi.compute_instances],
    }


def observed_gi_from_json(data: dict[str, Any]) -> ObservedGi:
    return ObservedGi(
        id=int(data["id"]),
        profile_id=int(data["profile_id"]),
        placement=placement_from_json(data["placement"]),
        compute_instances=tuple(_ci_from_json(ci) for ci in data.get("compute_instances", ())),
    )


def _desired_gi_from_json(data: dict[str, Any]) -> DesiredGi:
    return DesiredGi(profile_id=int(data["profile_id"]), ci_profile_ids=tuple(int(i) for i in data["ci_profile_ids"]))


@dataclass(frozen=True)
class GpuPlan:
    """What happens to one GPU the layout selects.

    mode_change: the MIG mode a set-mode step requests, None when no set-mode step is needed.
    reset: whether a GPU reset activates a pending mode (Ampere only).
    create: each new GI with its target placement, in creation order (largest first).
    """

    gpu: int
    keep: tuple[ObservedGi, ...]
    destroy: tuple[ObservedGi, ...]
    create: tuple[tuple[DesiredGi, Placement], ...]
    mode_change: bool | None
    reset: bool

    @property
    def is_unchanged(self) -> bool:
        return not self.destroy and not self.create and self.mode_change is None and not self.reset

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "keep": [observed_gi_to_json(gi) for gi in self.keep],
            "destroy": [observed_gi_to_json(gi) for gi in self.destroy],
            "create": [
                {
                    "profile_id": gi.profile_id,
                    "ci_profile_ids": list(gi.ci_profile_ids),
                    "placement": placement_to_json(placement),
                }
                for gi, placement in self.create
            ],
            "mode_change": self.mode_change,
            "reset": self.reset,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GpuPlan:
        mode_change = data.get("mode_change")
        return cls(
            gpu=int(data["gpu"]),
            keep=tuple(observed_gi_from_json(gi) for gi in data.get("keep", ())),
            destroy=tuple(observed_gi_from_json(gi) for gi in data.get("destroy", ())),
            create=tuple(
                (_desired_gi_from_json(c), placement_from_json(c["placement"])) for c in data.get("create", ())
            ),
            mode_change=None if mode_change is None else bool(mode_change),
            reset=bool(data.get("reset", False)),
        )


@dataclass(frozen=True)
class Plan:
    """Per-GPU decisions for the GPUs a layout selects, and the node-wide ordered steps."""

    gpus: tuple[GpuPlan, ...]
    steps: tuple[Step, ...]

    @property
    def is_empty(self) -> bool:
        return not self.steps

    def gpu(self, index: int) -> GpuPlan | None:
        return next((g for g in self.gpus if g.gpu == index), None)

    def steps_for(self, index: int) -> tuple[Step, ...]:
        return tuple(step for step in self.steps if step.gpu == index)

    def to_json(self) -> dict[str, Any]:
        return {"gpus": [g.to_json() for g in self.gpus], "steps": [s.to_json() for s in self.steps]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        return cls(
            gpus=tuple(GpuPlan.from_json(g) for g in data.get("gpus", ())),
            steps=tuple(Step.from_json(s) for s in data.get("steps", ())),
        )
