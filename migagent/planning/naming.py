"""Human names for desired and observed GPU instances, in mig-parted's profile vocabulary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from migagent.catalog.model import GiProfile, ProfileTable
from migagent.layout.desired import DesiredGi
from migagent.layout.equivalence import ci_sizes
from migagent.layout.profile import ci_profile_name, gi_profile_name
from migagent.planning.steps import Step, StepKind


def gi_name(table: ProfileTable, profile_id: int) -> str:
    gi = table.gi_profile(profile_id)
    return f"GI profile {profile_id}" if gi is None else str(gi_profile_name(gi, table))


def ci_name(table: ProfileTable, gi: GiProfile | None, ci_profile_id: int) -> str:
    ci = None if gi is None else gi.ci_profile(ci_profile_id)
    if gi is None or ci is None:
        return f"CI profile {ci_profile_id}"
    return str(ci_profile_name(gi, ci, table))


def _counted(names: Iterable[str]) -> str:
    counts = Counter(names)
    return ", ".join(f"{name} x{count}" for name, count in counts.items())


def describe_gi(table: ProfileTable, profile_id: int, ci_profile_ids: Sequence[int]) -> str:
    """`3g.20gb` when the GI holds one CI the size of its default (layout.equivalence), else
    `3g.20gb[1c.3g.20gb x3]`."""
    gi = table.gi_profile(profile_id)
    name = gi_name(table, profile_id)
    if gi is not None and ci_sizes(table, profile_id, ci_profile_ids) == (gi.default_ci.slices,):
        return name
    if not ci_profile_ids:
        return f"{name}[no CIs]"
    return f"{name}[{_counted(ci_name(table, gi, ci) for ci in ci_profile_ids)}]"


def describe_desired(table: ProfileTable, gi: DesiredGi) -> str:
    return describe_gi(table, gi.profile_id, gi.ci_profile_ids)


def describe_multiset(table: ProfileTable, gis: Sequence[DesiredGi]) -> str:
    """`3g.20gb x2 + 2g.10gb x1`, largest first; `no instances` when empty."""
    if not gis:
        return "no instances"
    counts = Counter(describe_desired(table, gi) for gi in largest_first(table, gis))
    return " + ".join(f"{name} x{count}" for name, count in counts.items())


def size_key(table: ProfileTable, gi: DesiredGi) -> tuple[int, int, int, tuple[int, ...]]:
    """Sort key putting larger GIs first (memory slices, then compute slices), then by ids."""
    profile = table.gi_profile(gi.profile_id)
    memory = profile.memory_slices if profile is not None else 0
    compute = profile.slices if profile is not None else 0
    return (-memory, -compute, gi.profile_id, gi.ci_profile_ids)


def largest_first(table: ProfileTable, gis: Iterable[DesiredGi]) -> tuple[DesiredGi, ...]:
    return tuple(sorted(gis, key=lambda gi: size_key(table, gi)))


def step_text(step: Step, table: ProfileTable | None) -> str:
    """A step as a person reads it, with profile names and placements: `GPU 3: destroy 1g.10gb at
    slot 2`, `GPU 0: create compute instance 1c.3g.40gb at slot 0 in 3g.40gb at slot 4`. Without
    the GPU's profile table (not known), the NVML profile ids stand in for the names."""
    head = f"GPU {step.gpu}:"
    gi = _gi_at(step, table)
    ci = _ci_at(step, table)
    match step.kind:
        case StepKind.SET_MODE:
            return f"{head} set MIG {'on' if step.mig_enabled else 'off'}"
        case StepKind.RESET_GPU:
            return f"{head} reset the GPU to activate MIG {'on' if step.mig_enabled else 'off'}"
        case StepKind.DESTROY_GI:
            return f"{head} destroy {gi}"
        case StepKind.CREATE_GI:
            return f"{head} create {gi}"
        case StepKind.DESTROY_CI:
            return f"{head} destroy compute instance {ci} in {gi}"
        case StepKind.CREATE_CI:
            return f"{head} create compute instance {ci} in {gi}"
    raise AssertionError(step.kind)  # pragma: no cover - exhaustive match


def _gi_at(step: Step, table: ProfileTable | None) -> str:
    if step.gi_profile_id is None or step.gi_placement is None:
        return "-"
    name = f"GI profile {step.gi_profile_id}" if table is None else gi_name(table, step.gi_profile_id)
    return f"{name} at slot {step.gi_placement.start}"


def _ci_at(step: Step, table: ProfileTable | None) -> str:
    if step.ci_profile_id is None or step.ci_placement is None:
        return "-"
    gi = None if table is None or step.gi_profile_id is None else table.gi_profile(step.gi_profile_id)
    name = f"CI profile {step.ci_profile_id}" if table is None else ci_name(table, gi, step.ci_profile_id)
    return f"{name} at slot {step.ci_placement.start}"
