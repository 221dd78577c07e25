"""Plan steps: small, idempotent NVML operations, each able to tell from an observation whether it is done.

Steps address GPU instances by their placement (unique on a GPU and known before the GI exists),
never by GI id: ids are chosen by the driver and differ between boards (docs/nvml.md §7).
A replayed step whose `is_done` holds is skipped, which is what makes a crashed apply resumable.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from migagent.catalog.model import Placement
from migagent.layout.observed import Observation, ObservedGi


class StepKind(enum.StrEnum):
    DESTROY_CI = "destroy-ci"
    DESTROY_GI = "destroy-gi"
    SET_MODE = "set-mode"
    RESET_GPU = "reset-gpu"
    CREATE_GI = "create-gi"
    CREATE_CI = "create-ci"


# The safe order of an apply: tear down before changing mode, reset only after mode, build last.
STEP_ORDER: tuple[StepKind, ...] = tuple(StepKind)


@dataclass(frozen=True)
class Step:
    """One operation on one GPU.

    gi_placement / gi_profile_id: the GI the step acts on (destroy-ci, destroy-gi, create-gi, create-ci).
    ci_placement / ci_profile_id: the CI (destroy-ci, create-ci). mig_enabled: the target mode (set-mode,
    reset-gpu: the mode the reset activates).
    """

    kind: StepKind
    gpu: int
    gi_profile_id: int | None = None
    gi_placement: Placement | None = None
    ci_profile_id: int | None = None
    ci_placement: Placement | None = None
    mig_enabled: bool | None = None

    def _gi(self, observation: Observation) -> ObservedGi | None:
        if self.gi_placement is None:
            return None
        gi = observation.gpu(self.gpu).gi_at(self.gi_placement)
        if gi is None or gi.profile_id != self.gi_profile_id:
            return None
        return gi

    def _has_ci(self, observation: Observation) -> bool:
        gi = self._gi(observation)
        return gi is not None and any(
            ci.profile_id == self.ci_profile_id and ci.placement == self.ci_placement
            for ci in gi.compute_instances
        )

    def is_done(self, observation: Observation) -> bool:
        gpu = observation.gpu(self.gpu)
        match self.kind:
            case StepKind.DESTROY_CI:
                return not self._has_ci(observation)
            case StepKind.DESTROY_GI:
                return self._gi(observation) is None
            case StepKind.SET_MODE:
                # Hopper+ activates in place: a mode left pending there (GPU busy) still needs the call.
                activated = gpu.mode_change_needs_reset or gpu.mig_current == self.mig_enabled
                return gpu.mig_pending == self.mig_enabled and activated
            case StepKind.RESET_GPU:
                return gpu.mig_current == self.mig_enabled and not gpu.mode_change_pending
            case StepKind.CREATE_GI:
                return self._gi(observation) is not None
            case StepKind.CREATE_CI:
                return self._has_ci(observation)
        raise AssertionError(self.kind)  # pragma: no cover - exhaustive match

    def describe(self) -> str:
        gi = f" GI {self.gi_profile_id}@{self.gi_placement}" if self.gi_placement is not None else ""
        ci = f" CI {self.ci_profile_id}@{self.ci_placement}" if self.ci_placement is not None else ""
        mode = "" if self.mig_enabled is None else (" MIG on" if self.mig_enabled else " MIG off")
        return f"GPU {self.gpu}: {self.kind.value}{gi}{ci}{mode}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind.value, "gpu": self.gpu}
        for name in ("gi_profile_id", "ci_profile_id", "mig_enabled"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        for name in ("gi_placement", "ci_placement"):
            placement = getattr(self, name)
            if placement is not None:
                data[name] = [placement.start, placement.size]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        def placement(key: str) -> Placement | None:
            value = data.get(key)
            return None if value is None else Placement(int(value[0]), int(value[1]))

        return cls(
            kind=StepKind(data["kind"]),
            gpu=int(data["gpu"]),
            gi_profile_id=data.get("gi_profile_id"),
            gi_placement=placement("gi_placement"),
            ci_profile_id=data.get("ci_profile_id"),
            ci_placement=placement("ci_placement"),
            mig_enabled=data.get("mig_enabled"),
        )
