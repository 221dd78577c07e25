"""When two GPU instances hold the same compute instances, as NVIDIA's tools count them.

go-nvlib (and so mig-parted, the device plugin and GPU Feature Discovery) names a compute instance
by its compute slices within its GI, `1c.3g.40gb`, or `1g.20gb` when it fills the GI, never by its
NVML CI profile. Where one GI offers two CI profiles of one size they are the same MIG device to
those tools: in Hopper's and Blackwell's 1g double-memory GIs (1g.20gb on an H100) the driver offers
`1_SLICE` (CI profile 0, the one mig-parted creates: go-nvlib meets it first) and `1_SLICE_REV1`
(profile 7, the driver's default and migagent's choice: it has the GI's every SM)
[docs/nvml.md §8; whether profile 0 is offered there is uncertain, see FakeNvml's
`one_slice_ci_beside_rev1`]. migagent asserts and keeps GIs by this identity, so a node mig-parted
made is taken over without destroying and recreating them for a profile number.
"""

from __future__ import annotations

from collections.abc import Sequence

from migagent.catalog.model import ProfileTable


def ci_sizes(table: ProfileTable | None, gi_profile_id: int, ci_profile_ids: Sequence[int]) -> tuple[int, ...]:
    """The CIs' compute slices, sorted; a CI profile the table does not know keeps its id (as -1 - id),
    so it is equivalent to nothing but itself."""
    gi = None if table is None else table.gi_profile(gi_profile_id)
    sizes = []
    for ci_id in ci_profile_ids:
        ci = None if gi is None else gi.ci_profile(ci_id)
        sizes.append(-1 - ci_id if ci is None else ci.slices)
    return tuple(sorted(sizes))


def instance_identity(
    table: ProfileTable | None, gi_profile_id: int, ci_profile_ids: Sequence[int]
) -> tuple[int, tuple[int, ...]]:
    """What a GPU instance is to NVIDIA's tools: its GI profile and its CIs' sizes."""
    return gi_profile_id, ci_sizes(table, gi_profile_id, ci_profile_ids)
