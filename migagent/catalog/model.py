"""Value types for MIG profile tables.

The same `ProfileTable` describes a GPU whether it comes from the shipped catalog (offline planning,
the simulator) or from NVML on a real GPU, so the planner never cares which.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class Placement:
    """A contiguous run of slices: memory slices for a GI, compute slices (GI-relative) for a CI."""

    start: int
    size: int

    @property
    def end(self) -> int:
        return self.start + self.size

    def slots(self) -> frozenset[int]:
        return frozenset(range(self.start, self.end))

    def overlaps(self, other: Placement) -> bool:
        return self.start < other.end and other.start < self.end

    def __str__(self) -> str:
        return f"{self.start}:{self.size}"


class Confidence(enum.StrEnum):
    """How sure we are of a catalog row: seen on a GPU, documented by NVIDIA, or inferred (docs/nvml.md)."""

    OBSERVED = "observed"
    DOCUMENTED = "documented"
    ESTIMATED = "estimated"


class MediaAttribute(enum.StrEnum):
    """The media-engine flavour a GI profile carries, as written in profile names."""

    NONE = ""
    ME = "+me"
    ME_ALL = "+me.all"
    NO_ME = "-me"
    GFX = "+gfx"


# NVML_GPU_INSTANCE_PROFILE_* enum values (nvml.h) -> what they add to a profile name.
_GI_ENUM_ATTRIBUTE: dict[int, MediaAttribute] = {
    0x7: MediaAttribute.ME,
    0x8: MediaAttribute.ME,
    0xA: MediaAttribute.GFX,
    0xB: MediaAttribute.GFX,
    0xC: MediaAttribute.GFX,
    0x11: MediaAttribute.GFX,
    0xD: MediaAttribute.NO_ME,
    0xE: MediaAttribute.NO_ME,
    0xF: MediaAttribute.ME_ALL,
    0x10: MediaAttribute.ME_ALL,
}
GI_PROFILE_ENUM_COUNT = 0x12
CI_PROFILE_ENUM_COUNT = 9


def media_attribute_of_enum(enum_value: int) -> MediaAttribute:
    return _GI_ENUM_ATTRIBUTE.get(enum_value, MediaAttribute.NONE)


@dataclass(frozen=True)
class Engines:
    copy: int = 0
    decoders: int = 0
    encoders: int = 0
    jpeg: int = 0
    ofa: int = 0


@dataclass(frozen=True)
class CiProfile:
    """A compute-instance profile offered inside one GI profile. `id` equals the NVML enum value."""

    id: int
    slices: int
    sms: int
    max_instances: int
    placements: tuple[Placement, ...]
    is_default: bool


@dataclass(frozen=True)
class GiProfile:
    """A GPU-instance profile. `id` is NVML's profile ID, `enum_value` the query enum (docs/nvml.md §2)."""

    id: int
    enum_value: int
    slices: int
    memory_mb: int
    sms: int
    engines: Engines
    max_instances: int
    placements: tuple[Placement, ...]
    ci_profiles: tuple[CiProfile, ...]
    confidence: Confidence = Confidence.OBSERVED
    # Catalog fields (`memory_mb`, `sms`, `ce`, `dec`...) whose published sources disagree; `note` says how.
    # Provenance, not profile data: a table read from NVML equals the catalog's without them.
    disputed: tuple[str, ...] = field(default=(), compare=False)
    # Catalog fields never seen on hardware (H20 SM counts): the value is a stand-in so the simulator
    # runs, not a fact; doctor reports NVML's value as the one to contribute.
    unknown: tuple[str, ...] = field(default=(), compare=False)
    note: str = field(default="", compare=False)

    @property
    def memory_slices(self) -> int:
        return self.placements[0].size if self.placements else 0

    @property
    def media(self) -> MediaAttribute:
        return media_attribute_of_enum(self.enum_value)

    @property
    def default_ci(self) -> CiProfile:
        for ci in self.ci_profiles:
            if ci.is_default:
                return ci
        return max(self.ci_profiles, key=lambda ci: ci.slices)

    def ci_profile(self, ci_id: int) -> CiProfile | None:
        return next((ci for ci in self.ci_profiles if ci.id == ci_id), None)


@dataclass(frozen=True)
class ProfileTable:
    """Everything needed to name, resolve and place MIG instances on one GPU."""

    total_memory_mb: int
    memory_slices: int
    compute_slices: int
    gi_profiles: tuple[GiProfile, ...]

    def gi_profile(self, profile_id: int) -> GiProfile | None:
        return next((gi for gi in self.gi_profiles if gi.id == profile_id), None)

    def gi_profile_by_enum(self, enum_value: int) -> GiProfile | None:
        return next((gi for gi in self.gi_profiles if gi.enum_value == enum_value), None)


class Architecture(enum.StrEnum):
    AMPERE = "ampere"
    HOPPER = "hopper"
    BLACKWELL = "blackwell"


@dataclass(frozen=True)
class GpuModel:
    """One catalog entry: identity, profile table and per-architecture MIG behaviour."""

    key: str
    name: str
    pci_device_ids: tuple[int, ...]
    names_by_pci_id: tuple[tuple[int, str], ...]
    architecture: Architecture
    max_mig_devices: int
    profiles: ProfileTable
    note: str = ""
    # Where each fact of the row comes from (captures, NVIDIA docs); estimates are marked on the rows.
    evidence: tuple[str, ...] = ()
    placements_confidence: Confidence = Confidence.OBSERVED
    # Set on a driver variant: the table some drivers report for the model with this key (same PCI ids,
    # other memory sizes, so other profile names). Never found by PCI id; `validate` checks against it.
    variant_of: str = ""

    @property
    def primary_pci_device_id(self) -> int:
        return self.pci_device_ids[0]

    @property
    def mode_change_needs_reset(self) -> bool:
        """Ampere activates a MIG mode change only through a GPU reset; Hopper and later do not."""
        return self.architecture is Architecture.AMPERE

    @property
    def mig_mode_persists_across_reboot(self) -> bool:
        """Ampere keeps MIG mode in the InfoROM; Hopper+ fall back to disabled at driver reload."""
        return self.architecture is Architecture.AMPERE
