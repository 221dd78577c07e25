"""Compute-instance profiles of a GI profile for GPUs the catalog does not know (inferred rule).

NVML reports CI profiles only through an existing GPU instance
(`nvmlGpuInstanceGetComputeInstanceProfileInfo` takes a GI handle), so a profile table read before
any GI exists cannot contain them. For catalog models the catalog's CI rows are used; for other
GPUs this rule, inferred from A100/A30/H100 `-lcip` captures (docs/nvml.md §8) and
checked against every catalog model by the tests, stands in:

* the full-GI CI is the default, placed `0:n` (n = the GI's compute slices); its profile id is the
  CI enum of that slice count (1->0, 2->1, 3->2, 4->3, 6->6, 7->4, 8->5);
* a partial CI of c = 1, 2, 3 or 4 compute slices is offered when c < n, except 3c inside a
  4-slice GI (never listed on A100/A30); it sits at starts 0, c, 2c... that fit (3c: 0 and 4);
* a 1-slice GI with more SMs than the plain 1g profile (Hopper+ double-memory 1g) gets the
  `1_SLICE_REV1` CI (id 7) with all its SMs as default, besides the plain 1c;
* a c-slice CI has the SMs of the plain c-slice GI profile (enum c-1), else a proportional share.
"""

from __future__ import annotations

from collections.abc import Mapping

from migagent.catalog import CiProfile, Placement

_CI_ENUM_BY_SLICES: dict[int, int] = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}
CI_PROFILE_1_SLICE_REV1 = 7
_PARTIAL_SLICES = (1, 2, 3, 4)
# NVML_GPU_INSTANCE_PROFILE_{1,2,3,4}_SLICE: the "plain" GI profile of each compute-slice count.
PLAIN_GI_ENUMS = frozenset({0, 1, 2, 3})


def inferred_ci_profiles(
    *, gi_slices: int, gi_sms: int, plain_sms_by_slices: Mapping[int, int]
) -> tuple[CiProfile, ...]:
    def sms(slices: int) -> int:
        return plain_sms_by_slices.get(slices, gi_sms * slices // max(gi_slices, 1))

    profiles = [
        _partial(slices, gi_slices=gi_slices, sms=sms(slices))
        for slices in _PARTIAL_SLICES
        if slices < gi_slices and not (slices == 3 and gi_slices == 4)
    ]
    plain_1g_sms = plain_sms_by_slices.get(1)
    if gi_slices == 1 and plain_1g_sms is not None and gi_sms > plain_1g_sms:
        profiles.append(_partial(1, gi_slices=1, sms=plain_1g_sms))
        profiles.append(_full(CI_PROFILE_1_SLICE_REV1, gi_slices=1, sms=gi_sms))
    elif gi_slices in _CI_ENUM_BY_SLICES:
        profiles.append(_full(_CI_ENUM_BY_SLICES[gi_slices], gi_slices=gi_slices, sms=gi_sms))
    return tuple(sorted(profiles, key=lambda ci: ci.id))


def _partial(slices: int, *, gi_slices: int, sms: int) -> CiProfile:
    step = 4 if slices == 3 else slices
    placements = tuple(Placement(start, slices) for start in range(0, gi_slices - slices + 1, step))
    return CiProfile(
        id=_CI_ENUM_BY_SLICES[slices],
        slices=slices,
        sms=sms,
        max_instances=len(placements),
        placements=placements,
        is_default=False,
    )


def _full(profile_id: int, *, gi_slices: int, sms: int) -> CiProfile:
    return CiProfile(
        id=profile_id,
        slices=gi_slices,
        sms=sms,
        max_instances=1,
        placements=(Placement(0, gi_slices),),
        is_default=True,
    )
