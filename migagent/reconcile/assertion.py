"""Is the selected layout applied? mig-parted's `assert`, comparing only the GPUs the layout covers.

A GPU matches when its MIG mode (current and pending) is the desired one and, with MIG enabled, its
GPU instances are the desired multiset of (GI profile, CI sizes), wherever they are placed:
exactly the question mig-parted's AssertMigConfig asks, minus its habit of looking at GPUs that
no entry selects.
"""

from __future__ import annotations

from collections import Counter

from migagent.layout.desired import DesiredGi, DesiredGpu, DesiredNode
from migagent.layout.equivalence import instance_identity
from migagent.layout.observed import Observation, ObservedGpu
from migagent.planning.naming import describe_multiset


def _word(enabled: bool) -> str:
    return "enabled" if enabled else "disabled"


def _gpu_or_reason(observation: Observation, index: int) -> ObservedGpu | str:
    try:
        return observation.gpu(index)
    except KeyError:
        return f"GPU {index}: selected by the layout but not present on this node"


def _mode_reason(seen: ObservedGpu, want: DesiredGpu) -> str | None:
    if not seen.mig_capable:
        return None if not want.mig_enabled else f"GPU {seen.index} ({seen.name}): not MIG capable"
    if seen.mig_current == want.mig_enabled and seen.mig_pending == want.mig_enabled:
        return None
    pending = "" if seen.mig_pending == seen.mig_current else f", pending {_word(seen.mig_pending)}"
    return (
        f"GPU {seen.index} ({seen.name}): MIG mode is {_word(seen.mig_current)}{pending};"
        f" the layout wants it {_word(want.mig_enabled)}"
    )


def observed_instances(gpu: ObservedGpu) -> tuple[DesiredGi, ...]:
    """The GPU's current instances in the planner's vocabulary (profile ids, sorted CI ids)."""
    return tuple(sorted(DesiredGi(gi.profile_id, gi.ci_profile_ids) for gi in gpu.gpu_instances))


def _config_reason(seen: ObservedGpu, want: DesiredGpu) -> str | None:
    """GIs compare by what they are to NVIDIA's tools (layout.equivalence): a 1g.20gb GI mig-parted
    made with CI profile 0 is the layout's 1g.20gb, whose default CI is profile 7."""
    if not want.mig_enabled or not seen.mig_capable:
        return None
    have = observed_instances(seen)

    def identities(gis: tuple[DesiredGi, ...]) -> Counter[tuple[int, tuple[int, ...]]]:
        return Counter(instance_identity(seen.profiles, gi.profile_id, gi.ci_profile_ids) for gi in gis)

    if identities(have) == identities(want.gpu_instances):
        return None
    if seen.profiles is None:
        return f"GPU {seen.index} ({seen.name}): its MIG devices differ from the layout"
    return (
        f"GPU {seen.index} ({seen.name}): has {describe_multiset(seen.profiles, have)};"
        f" the layout wants {describe_multiset(seen.profiles, want.gpu_instances)}"
    )


def mode_mismatches(observation: Observation, desired: DesiredNode) -> tuple[str, ...]:
    """One reason per covered GPU whose MIG mode is not the desired one (empty: modes applied)."""
    reasons: list[str] = []
    for want in desired.gpus:
        seen = _gpu_or_reason(observation, want.index)
        reason = seen if isinstance(seen, str) else _mode_reason(seen, want)
        if reason is not None:
            reasons.append(reason)
    return tuple(reasons)


def config_mismatches(observation: Observation, desired: DesiredNode) -> tuple[str, ...]:
    """Mode reasons, then one reason per covered GPU whose MIG devices differ (empty: applied)."""
    reasons = list(mode_mismatches(observation, desired))
    for want in desired.gpus:
        seen = _gpu_or_reason(observation, want.index)
        if isinstance(seen, str) or _mode_reason(seen, want) is not None:
            continue
        reason = _config_reason(seen, want)
        if reason is not None:
            reasons.append(reason)
    return tuple(reasons)


def mode_only_target(observation: Observation, desired: DesiredNode) -> DesiredNode:
    """The desired node restricted to MIG modes (mig-parted's `--mode-only`).

    GPUs already in the desired mode are left out, so they are not touched at all. A GPU whose
    current mode is already right but whose pending mode is not keeps its existing instances
    (they are named as desired so the planner keeps them); a GPU whose mode really changes loses
    them anyway.
    """
    targets: list[DesiredGpu] = []
    for want in desired.gpus:
        seen = _gpu_or_reason(observation, want.index)
        if isinstance(seen, str):
            targets.append(DesiredGpu(index=want.index, mig_enabled=want.mig_enabled))
            continue
        if _mode_reason(seen, want) is None or not seen.mig_capable:
            continue
        keep = observed_instances(seen) if want.mig_enabled and seen.mig_current else ()
        targets.append(
            DesiredGpu(index=want.index, mig_enabled=want.mig_enabled, gpu_instances=keep, config_name=want.config_name)
        )
    return DesiredNode(gpus=tuple(targets))
