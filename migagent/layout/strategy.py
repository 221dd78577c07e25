"""The NVIDIA device plugin's MIG strategies: what a node advertises, and which layouts it refuses.

The strategy is the plugin's `--mig-strategy` (the GPU Operator's `mig.strategy`, default `single`
there, `none` in the plugin's own chart). Rules (docs/device-plugin.md §1,
checked against NVIDIA's plugin v0.18.2 in tests/nvidia):
- `mixed`: each MIG device (compute instance) is one `nvidia.com/mig-<pattern>` (`+` written `.`),
  where the patterns are the GPU's full GPU-instance profiles in NVML's profile-enum order and the
  first one found anywhere in the device's profile name wins (internal/rm/device_map.go matches
  them unanchored): `1g.10gb+me` is advertised as `nvidia.com/mig-1g.10gb` (the `1g.10gb` pattern
  comes first), a CI smaller than its GI, `1c.3g.40gb`, as `nvidia.com/mig-3g.40gb`. A device no
  pattern matches makes the plugin exit. GPUs with MIG off stay `nvidia.com/gpu`; a MIG-enabled
  GPU without devices offers nothing.
- `single`: every MIG device is one `nvidia.com/gpu`; the plugin exits unless every GPU has the
  same MIG mode, every MIG-enabled GPU has devices, and all devices have one profile.
- `none`: MIG is ignored; every GPU, MIG-enabled or not, is one `nvidia.com/gpu`.

Pure: both the agent (expected allocatable, refusing a layout before the node is touched) and the
simulator's device plugin read the same rules from here, from a `GpuDevices` view of each GPU.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from migagent.catalog import ProfileTable
from migagent.layout.desired import DesiredGpu
from migagent.layout.gpus import gpus_named
from migagent.layout.observed import ObservedGpu
from migagent.layout.profile import MigProfile, ci_profile_name, gi_profile_name

GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


class MigStrategy(StrEnum):
    """How the device plugin turns MIG devices into extended resources."""

    MIXED = "mixed"
    """One resource per MIG profile, `nvidia.com/mig-<profile>`."""
    SINGLE = "single"
    """Every MIG device is a `nvidia.com/gpu`; the node's layout must be uniform."""
    NONE = "none"
    """MIG is ignored: every GPU is one `nvidia.com/gpu`."""


MIG_STRATEGIES = tuple(s.value for s in MigStrategy)


def mig_resource_name(profile: MigProfile | str) -> str:
    """`1g.10gb+me` -> `nvidia.com/mig-1g.10gb.me` (mixed strategy); a resource name passes unchanged."""
    text = str(profile)
    return text if text.startswith(MIG_RESOURCE_PREFIX) else MIG_RESOURCE_PREFIX + text.replace("+", ".")


@dataclass(frozen=True)
class GpuDevices:
    """One GPU as the device plugin sees it: MIG on or off, and the profile of each MIG device (CI)."""

    index: int
    mig_enabled: bool
    profiles: tuple[MigProfile, ...] = ()
    patterns: tuple[str, ...] = ()
    """The mixed strategy's resource patterns for this GPU (`resource_patterns`); () when unknown:
    then a full profile is named after itself and any other matches nothing."""

    @property
    def label(self) -> str:
        """How messages name the GPU, e.g. `GPU 0`."""
        return f"GPU {self.index}"


def resource_patterns(table: ProfileTable) -> tuple[str, ...]:
    """The GPU's full GPU-instance profile names in NVML's profile-enum order: the patterns the plugin's
    mixed strategy names MIG devices by (rm.AddDefaultResourcesToConfig through VisitMigProfiles)."""
    return tuple(str(gi_profile_name(gi, table)) for gi in sorted(table.gi_profiles, key=lambda gi: gi.enum_value))


def desired_devices(gpu: ObservedGpu, want: DesiredGpu) -> GpuDevices:
    """`gpu` as the device plugin will see it once it holds `want`: a MIG device per compute instance."""
    table = gpu.profiles
    if table is None:
        return GpuDevices(gpu.index, want.mig_enabled)
    profiles = [
        ci_profile_name(gi_profile, ci_profile, table)
        for gi in want.gpu_instances
        if (gi_profile := table.gi_profile(gi.profile_id)) is not None
        for ci_id in gi.ci_profile_ids
        if (ci_profile := gi_profile.ci_profile(ci_id)) is not None
    ]
    return GpuDevices(gpu.index, want.mig_enabled, tuple(profiles), resource_patterns(table))


def mixed_resource_name(profile: MigProfile, patterns: Sequence[str]) -> str | None:
    """The resource the mixed strategy advertises a device of `profile` as: the first pattern found in
    its name (None: no pattern matches, the plugin exits)."""
    if not patterns:
        return mig_resource_name(profile) if profile.is_full_gi else None
    name = str(profile)
    return next((mig_resource_name(pattern) for pattern in patterns if pattern in name), None)


def _which(gpus: Iterable[GpuDevices], *, verb: tuple[str, str] | None = None) -> str:
    """`GPU 3` or `GPUs 0-7` (a refusal names a whole node's GPUs in a few words); with `verb`
    (singular, plural) the verb that agrees: `GPUs 0-7 have`."""
    indices = [gpu.index for gpu in gpus]
    named = gpus_named(indices)
    return named if verb is None else f"{named} {verb[0] if len(set(indices)) == 1 else verb[1]}"


def _unmatched(gpu: GpuDevices) -> set[MigProfile]:
    """The GPU's MIG device profiles that none of the mixed strategy's patterns names (the plugin exits)."""
    return {profile for profile in gpu.profiles if mixed_resource_name(profile, gpu.patterns) is None}


def strategy_problems(strategy: MigStrategy, gpus: Sequence[GpuDevices]) -> list[str]:
    """Why the plugin, run with `strategy`, would exit on these GPUs (empty: it advertises them)."""
    if strategy is MigStrategy.MIXED:
        return [
            f"{_which(holders, verb=('has', 'have'))} MIG devices of profile {profile}, which matches none of the"
            f" device plugin's resource patterns. Use {profile.gi_name} (one compute instance per GPU instance)"
            " instead"
            for profile in sorted({p for gpu in gpus for p in _unmatched(gpu)}, key=str)
            for holders in [[gpu for gpu in gpus if profile in _unmatched(gpu)]]
        ]
    if strategy is MigStrategy.SINGLE:
        return _single_problems(gpus)
    return []


def _single_problems(gpus: Sequence[GpuDevices]) -> list[str]:
    problems: list[str] = []
    modes = {gpu.mig_enabled for gpu in gpus}
    if len(modes) > 1:
        on = _which(g for g in gpus if g.mig_enabled)
        off = _which(g for g in gpus if not g.mig_enabled)
        problems.append(f"all GPUs of the node must have the same MIG mode (MIG on: {on}; MIG off: {off})")
    empty = [g for g in gpus if g.mig_enabled and not g.profiles]
    if empty:
        problems.append(f"{_which(empty, verb=('has', 'have'))} MIG enabled but no MIG devices")
    kinds = Counter(str(profile) for gpu in gpus for profile in gpu.profiles)
    if len(kinds) > 1:
        holders = {name: _which(g for g in gpus if name in {str(p) for p in g.profiles}) for name in sorted(kinds)}
        problems.append(
            "more than one MIG device type on the node ("
            + "; ".join(f"{kinds[name]}x {name} on {where}" for name, where in holders.items())
            + "); the single strategy needs one profile on every MIG GPU, e.g. an all-<profile> layout"
        )
    return problems


def advertised_counts(strategy: MigStrategy, gpus: Sequence[GpuDevices]) -> dict[str, int]:
    """Resource name -> count the plugin advertises (call `strategy_problems` first: on a layout it
    refuses the plugin exits and advertises nothing)."""
    counts: Counter[str] = Counter()
    for gpu in gpus:
        if strategy is MigStrategy.NONE or not gpu.mig_enabled:
            counts[GPU_RESOURCE] += 1
        elif strategy is MigStrategy.SINGLE:
            counts[GPU_RESOURCE] += len(gpu.profiles)
        else:
            counts.update(str(mixed_resource_name(profile, gpu.patterns)) for profile in gpu.profiles)
    return dict(sorted(counts.items()))


def renamed_by_mixed(gpus: Sequence[GpuDevices]) -> list[tuple[str, MigProfile, str]]:
    """(GPU label, profile, advertised name) for each profile the mixed strategy advertises under
    another profile's resource (`1c.3g.40gb` as `nvidia.com/mig-3g.40gb`, `1g.10gb+me` as `...-1g.10gb`)."""
    found: list[tuple[str, MigProfile, str]] = []
    for gpu in gpus:
        for profile in sorted(set(gpu.profiles), key=str):
            name = mixed_resource_name(profile, gpu.patterns)
            if name is not None and name != mig_resource_name(profile):
                found.append((gpu.label, profile, name))
    return found
