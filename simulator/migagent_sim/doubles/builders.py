"""Observations and plans built from the shipped catalog, named the way users write profiles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from migagent.catalog import model_by_key
from migagent.catalog.model import GiProfile, Placement, ProfileTable
from migagent.layout.observed import ObservedCi, ObservedGi, ObservedGpu
from migagent.layout.profile import ci_profile_name, gi_profile_name
from migagent.node.port import PodRef, PodView
from migagent.planning.model import GpuPlan, Plan


def _gi_profile(table: ProfileTable, name: str) -> GiProfile:
    for profile in table.gi_profiles:
        if str(gi_profile_name(profile, table)) == name:
            return profile
    raise KeyError(name)


def mig_gpu(
    index: int,
    gis: Sequence[tuple[str, int] | tuple[str, int, Sequence[str]]],
    *,
    model_key: str = "A100-40GB",
    mig: bool = True,
) -> ObservedGpu:
    """A GPU with GIs given as (gi profile, placement start[, CI profile names]); default: one full CI."""
    model = model_by_key(model_key)
    table = model.profiles
    instances = []
    for gi_number, spec in enumerate(gis, start=1):
        profile = _gi_profile(table, spec[0])
        ci_names = spec[2] if len(spec) == 3 else [str(gi_profile_name(profile, table))]
        cis = []
        start = 0
        for ci_number, ci_name in enumerate(ci_names):
            ci_profile = next(
                c
                for c in sorted(profile.ci_profiles, key=lambda c: not c.is_default)
                if str(ci_profile_name(profile, c, table)) == ci_name
            )
            cis.append(
                ObservedCi(
                    id=ci_number,
                    profile_id=ci_profile.id,
                    placement=Placement(start, ci_profile.slices),
                    uuid=f"MIG-{index}-{gi_number}-{ci_number}",
                )
            )
            start += ci_profile.slices
        instances.append(
            ObservedGi(
                id=gi_number,
                profile_id=profile.id,
                placement=Placement(spec[1], profile.memory_slices),
                compute_instances=tuple(cis),
            )
        )
    return ObservedGpu(
        index=index,
        uuid=f"GPU-{index}",
        name=model.name,
        pci_bus_id=f"0000:{index:02x}:00.0",
        pci_device_id=model.primary_pci_device_id,
        mig_capable=True,
        mig_current=mig,
        mig_pending=mig,
        gpu_instances=tuple(instances),
        profiles=table,
        mode_change_needs_reset=model.mode_change_needs_reset,
    )


def gpu_plan(
    gpu: int,
    *,
    destroy: Sequence[ObservedGi] = (),
    keep: Sequence[ObservedGi] = (),
    mode_change: bool | None = None,
    reset: bool = False,
) -> GpuPlan:
    return GpuPlan(gpu=gpu, keep=tuple(keep), destroy=tuple(destroy), create=(), mode_change=mode_change, reset=reset)


def plan(*gpus: GpuPlan) -> Plan:
    return Plan(gpus=tuple(gpus), steps=())


@dataclass(frozen=True)
class Holding:
    namespace: str
    name: str
    resource_name: str
    device_ids: tuple[str, ...]
    container: str = "main"


def pod(
    name: str,
    *,
    namespace: str = "team",
    owner: str | None = "ReplicaSet",
    mirror: bool = False,
    gpu_resources: Sequence[str] = (),
    phase: str = "Running",
    labels: Mapping[str, str] | None = None,
    node_name: str = "gpu-node",
) -> PodView:
    """A pod as the port shows it: uid `uid-<name>`, labelled `app=<name>` unless `labels` say otherwise."""
    return PodView(
        ref=PodRef(namespace, name, f"uid-{name}"),
        labels=labels or {"app": name},
        owner_kinds=(owner,) if owner else (),
        is_mirror=mirror,
        node_name=node_name,
        phase=phase,
        gpu_resources=frozenset(gpu_resources),
    )
