"""What the NVIDIA device plugin (mixed strategy) advertises for a layout, and whether a Node shows it.

Mixed strategy (reference/landscape.md §3.1): every MIG device, i.e. every compute instance,
whose CI spans its whole GI (C == G) is one unit of `nvidia.com/mig-<profile>`, `+` written as
`.`. A CI smaller than its GI (a `<C>c.<G>g.<GB>gb` profile) matches no resource pattern and
makes the stock plugin exit, advertising nothing; `expected_resources` refuses such a layout
instead of predicting counts that will never appear. A GI without compute instances is no MIG
device and is not advertised. After a change, resources of profiles no longer present linger in
Node status as "0" (kubelet behaviour), so "0" and absent mean the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from migagent.errors import InvalidLayoutError
from migagent.kube.names import GPU_RESOURCE, MIG_RESOURCE_PREFIX, mig_resource_name
from migagent.layout.observed import Observation, ObservedGi, ObservedGpu
from migagent.layout.profile import ci_profile_name


class NotAdvertisableError(InvalidLayoutError):
    """A layout the device plugin cannot advertise (compute instances smaller than their GI)."""


def expected_resources(observation: Observation, *, include_full_gpus: bool = False) -> dict[str, int]:
    """Resource name -> count the plugin advertises for this layout (MIG resources only by default).

    include_full_gpus: also expect `nvidia.com/gpu` for GPUs with MIG disabled (mixed strategy
    advertises those as whole GPUs); off by default because only `nvidia.com/mig-*` is compared.
    """
    counts: Counter[str] = Counter()
    for gpu in observation.gpus:
        if gpu.mig_current:
            for gi in gpu.gpu_instances:
                counts.update(_gi_resources(gpu, gi))
        elif include_full_gpus:
            counts[GPU_RESOURCE] += 1
    return dict(sorted(counts.items()))


def _gi_resources(gpu: ObservedGpu, gi: ObservedGi) -> list[str]:
    table = gpu.profiles
    where = f"GPU {gpu.index} ({gpu.name}), GPU instance {gi.id} at {gi.placement}"
    if table is None:
        raise InvalidLayoutError(f"{where}: no profile table for this GPU, so its MIG devices cannot be named")
    gi_profile = table.gi_profile(gi.profile_id)
    if gi_profile is None:
        raise InvalidLayoutError(f"{where}: GI profile id {gi.profile_id} is not in this GPU's profile table")
    names = []
    for ci in gi.compute_instances:
        ci_profile = gi_profile.ci_profile(ci.profile_id)
        if ci_profile is None:
            raise InvalidLayoutError(f"{where}: CI profile id {ci.profile_id} is not offered by this GI profile")
        profile = ci_profile_name(gi_profile, ci_profile, table)
        if not profile.is_full_gi:
            raise NotAdvertisableError(
                f"{where}: compute instance profile {profile} is smaller than its GPU instance; the NVIDIA"
                f" device plugin (mixed strategy) advertises only whole-GI devices and exits on this one."
                f" Use {profile.gi_name} (one compute instance per GPU instance) instead"
            )
        names.append(mig_resource_name(str(profile)))
    return names


def advertisement_matches(
    allocatable: Mapping[str, int], expected: Mapping[str, int]
) -> tuple[bool, dict[str, tuple[int, int]]]:
    """(matches, diff): diff maps each differing resource to (advertised, expected).

    Every expected resource must be advertised with its count; every other `nvidia.com/mig-*`
    resource must be 0 or absent. Resources outside what was expected and not MIG are ignored.
    """
    names = set(expected) | {name for name in allocatable if name.startswith(MIG_RESOURCE_PREFIX)}
    diff = {
        name: (allocatable.get(name, 0), expected.get(name, 0))
        for name in sorted(names)
        if allocatable.get(name, 0) != expected.get(name, 0)
    }
    return (not diff, diff)


def describe_diff(diff: Mapping[str, tuple[int, int]]) -> str:
    """`nvidia.com/mig-1g.10gb: advertised 0, expected 7; ...`"""
    return "; ".join(f"{name}: advertised {have}, expected {want}" for name, (have, want) in diff.items())
