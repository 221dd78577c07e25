"""The resolved target for each GPU: what the planner aims at.

A layout entry names profiles and compute-instance counts; resolution against one GPU's profile
table turns that into GI profile ids, each with the CI profile ids it must hold.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class DesiredGi:
    """One GPU instance to exist: its NVML GI profile id and the CI profile ids inside it (sorted)."""

    profile_id: int
    ci_profile_ids: tuple[int, ...]


@dataclass(frozen=True)
class DesiredGpu:
    index: int
    mig_enabled: bool
    gpu_instances: tuple[DesiredGi, ...] = ()
    config_name: str = ""


@dataclass(frozen=True)
class DesiredNode:
    """Targets for the GPUs a layout selects; GPUs it does not select are absent and left untouched."""

    gpus: tuple[DesiredGpu, ...]

    def gpu(self, index: int) -> DesiredGpu | None:
        return next((g for g in self.gpus if g.index == index), None)
