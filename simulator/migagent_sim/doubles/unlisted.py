"""A GPU model as a driver newer than the installed nvidia-ml-py would show it: one GI profile more,
with a query enum and a profile id past pynvml's `NVML_GPU_INSTANCE_PROFILE_COUNT`.

Observation must still see GPU instances of that profile (nvml.h: enumerate profiles until
INVALID_ARGUMENT, not up to a constant); otherwise their slices would look free to the planner.
"""

from __future__ import annotations

import dataclasses

import pynvml

from migagent.catalog import CiProfile, GiProfile, GpuModel, Placement
from migagent.catalog.model import CI_PROFILE_ENUM_COUNT, GI_PROFILE_ENUM_COUNT


def unlisted_enum(model: GpuModel) -> int:
    """One enum past every constant pynvml and the catalog know, leaving a gap NVML answers NOT_SUPPORTED."""
    known = max(int(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT), GI_PROFILE_ENUM_COUNT)
    return max(known, *(p.enum_value + 1 for p in model.profiles.gi_profiles)) + 1


def unlisted_ci_profile_id() -> int:
    """A CI profile id (= its query enum) one past every constant pynvml and the catalog know."""
    return max(int(pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT), CI_PROFILE_ENUM_COUNT) + 1


def with_unlisted_gi_profile(model: GpuModel) -> GpuModel:
    """`model` plus a "1g with half the memory" GI profile (e.g. `1g.40gb` on an A100-80GB) at an enum
    and id no installed pynvml names. It offers the CIs of the model's plain 1-slice profile and one
    more, a 1-slice CI profile with an unlisted id too."""
    table = model.profiles
    plain = table.gi_profile_by_enum(pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
    if plain is None:
        raise ValueError(f"{model.key} has no plain 1-slice GI profile to derive an unlisted one from")
    half = table.memory_slices // 2
    unlisted = dataclasses.replace(
        plain,
        id=max(p.id for p in table.gi_profiles) + 1,
        enum_value=unlisted_enum(model),
        memory_mb=table.total_memory_mb // 2,
        max_instances=2,
        placements=(Placement(0, half), Placement(half, half)),
        ci_profiles=(
            *plain.ci_profiles,
            CiProfile(
                id=unlisted_ci_profile_id(),
                slices=1,
                sms=plain.sms,
                max_instances=1,
                placements=(Placement(0, 1),),
                is_default=False,
            ),
        ),
    )
    profiles: tuple[GiProfile, ...] = (*table.gi_profiles, unlisted)
    return dataclasses.replace(model, profiles=dataclasses.replace(table, gi_profiles=profiles))
