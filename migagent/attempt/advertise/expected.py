"""What the NVIDIA device plugin advertises for a layout under its MIG strategy, and whether a Node shows it.

The rules per strategy are in migagent.layout.strategy (checked against NVIDIA's plugin v0.18.2 in
tests/nvidia). Mixed: every compute instance is one `nvidia.com/mig-<pattern>`, the first of the
GPU's full profiles found in its profile name (`1g.10gb+me` counts as `nvidia.com/mig-1g.10gb`,
`1c.3g.40gb` as `nvidia.com/mig-3g.40gb`). Single: every MIG device is one `nvidia.com/gpu`, and a
non-uniform node makes it exit. None: whole GPUs. `expected_resources` refuses a layout the plugin
would exit on instead of predicting counts that will never appear; `check_advertisable` refuses, before
anything on the node is touched, a layout it would exit on or advertise as something it is not (mixed:
a compute instance smaller than its GI is advertised as the whole GI's resource). A GI without compute instances is
no MIG device and is not advertised. After a change, resources of profiles no longer present linger in
Node status as "0" (kubelet behaviour), so "0" and absent mean the same.
"""

from __future__ import annotations

from collections.abc import Mapping

from migagent.errors import InvalidLayoutError
from migagent.layout.desired import DesiredNode
from migagent.layout.observed import Observation, ObservedGi, ObservedGpu
from migagent.layout.profile import MigProfile, ci_profile_name
from migagent.layout.strategy import (
    GpuDevices,
    MigStrategy,
    advertised_counts,
    desired_devices,
    renamed_by_mixed,
    resource_patterns,
    strategy_problems,
)
from migagent.node.names import GPU_RESOURCE


class NotAdvertisableError(InvalidLayoutError):
    """A layout the device plugin cannot advertise (compute instances smaller than their GI)."""


def expected_resources(
    observation: Observation, *, strategy: MigStrategy = MigStrategy.MIXED, include_full_gpus: bool = False
) -> dict[str, int]:
    """Resource name -> count the plugin, run with `strategy`, advertises for this layout.

    Raises NotAdvertisableError when that plugin would exit on it (see migagent.layout.strategy).
    include_full_gpus (mixed only): also expect `nvidia.com/gpu` for GPUs with MIG disabled; off by
    default because under mixed only `nvidia.com/mig-*` is compared. Single and none always expect
    `nvidia.com/gpu`: it is the one resource they advertise.
    """
    gpus = [observed_devices(gpu) for gpu in observation.gpus]
    problems = strategy_problems(strategy, gpus)
    if problems:
        raise NotAdvertisableError(
            f"the NVIDIA device plugin ({strategy} strategy) exits on this layout and advertises nothing:"
            f" {'; '.join(problems)}"
        )
    counts = advertised_counts(strategy, gpus)
    if strategy is MigStrategy.MIXED and not include_full_gpus:
        counts.pop(GPU_RESOURCE, None)
    return counts


def check_advertisable(desired: DesiredNode, observation: Observation, strategy: MigStrategy) -> None:
    """Raise NotAdvertisableError when the device plugin, run with `strategy`, would exit on the node
    this layout leaves: GPUs the layout selects as desired, the others as they are now."""
    gpus = [
        observed_devices(gpu) if (want := desired.gpu(gpu.index)) is None else desired_devices(gpu, want)
        for gpu in observation.gpus
    ]
    problems = strategy_problems(strategy, gpus)
    if problems:
        raise NotAdvertisableError(
            f"the NVIDIA device plugin ({strategy} strategy) would exit on this layout and advertise nothing,"
            f" so nothing was changed: {'; '.join(problems)}"
        )
    smaller = [(gpu, p, name) for gpu, p, name in renamed_by_mixed(gpus) if not p.is_full_gi]
    if strategy is MigStrategy.MIXED and smaller:
        raise NotAdvertisableError(
            "the NVIDIA device plugin (mixed strategy, v0.18.2) would advertise compute instances smaller than"
            " their GPU instance as the whole GPU instance, so a pod asking for it would get a fraction;"
            " nothing was changed: "
            + "; ".join(
                f"{gpu} has compute instance profile {p}, advertised as {name}."
                f" Use {p.gi_name} (one compute instance per GPU instance) instead"
                for gpu, p, name in smaller
            )
        )


def observed_devices(gpu: ObservedGpu) -> GpuDevices:
    """The GPU as the device plugin sees it now: MIG mode and the profile of every MIG device."""
    return GpuDevices(
        gpu.index,
        gpu.mig_current,
        tuple(p for gi in gpu.gpu_instances for p in _gi_profiles(gpu, gi)) if gpu.mig_current else (),
        resource_patterns(gpu.profiles) if gpu.profiles is not None else (),
    )


def _gpu_label(gpu: ObservedGpu) -> str:
    return f"GPU {gpu.index} ({gpu.name})"


def _gi_profiles(gpu: ObservedGpu, gi: ObservedGi) -> list[MigProfile]:
    table = gpu.profiles
    where = f"{_gpu_label(gpu)}, GPU instance {gi.id} at {gi.placement}"
    if table is None:
        raise InvalidLayoutError(f"{where}: no profile table for this GPU, so its MIG devices cannot be named")
    gi_profile = table.gi_profile(gi.profile_id)
    if gi_profile is None:
        raise InvalidLayoutError(f"{where}: GI profile id {gi.profile_id} is not in this GPU's profile table")
    profiles = []
    for ci in gi.compute_instances:
        ci_profile = gi_profile.ci_profile(ci.profile_id)
        if ci_profile is None:
            raise InvalidLayoutError(f"{where}: CI profile id {ci.profile_id} is not offered by this GI profile")
        profiles.append(ci_profile_name(gi_profile, ci_profile, table))
    return profiles


def describe_diff(diff: Mapping[str, tuple[int, int]]) -> str:
    """`nvidia.com/mig-1g.10gb: advertised 0, expected 7; ...`"""
    return "; ".join(f"{name}: advertised {have}, expected {want}" for name, (have, want) in diff.items())
