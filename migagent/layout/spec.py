"""Value types for a parsed mig-parted v1 layout file (docs/mig-parted.md §1).

A file holds named configs; a config is an ordered list of entries; an entry selects GPUs (by index
and PCI id) and says what they should hold. Parsing lives in `parse.py`, per-GPU resolution in
`resolve.py`; these types only carry what the file said.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from migagent.layout.profile import MigProfile

ALL_DEVICES: Literal["all"] = "all"
_UINT32_MAX = 0xFFFF_FFFF


def format_pci_id(value: int) -> str:
    """Write a 32-bit PCI id the way mig-parted's files do: `0x233010DE` (device, then vendor)."""
    return f"0x{value:08X}"


@dataclass(frozen=True)
class PciFilter:
    """One `device-filter` element: `0xDDDDVVVV`, optionally qualified by `:0xSSSSVVVV` (subsystem)."""

    device_vendor: int
    subsystem: int | None = None

    def matches(self, pci_device_id: int, subsystem_id: int | None) -> bool:
        # Without a qualifier only device and vendor are compared (mig-parted v0.15.0 semantics).
        if pci_device_id != self.device_vendor:
            return False
        return self.subsystem is None or self.subsystem == subsystem_id

    def may_match(self, pci_device_id: int) -> bool:
        """Whether some board with this device id matches, whatever its subsystem (offline checks)."""
        return pci_device_id == self.device_vendor

    def __str__(self) -> str:
        text = format_pci_id(self.device_vendor)
        return text if self.subsystem is None else f"{text}:{format_pci_id(self.subsystem)}"


@dataclass(frozen=True)
class LayoutEntry:
    """One list item under a config name. `index` is its position in that list (0-based)."""

    index: int
    devices: Literal["all"] | tuple[int, ...]
    device_filter: tuple[PciFilter, ...]
    mig_enabled: bool
    mig_devices: tuple[tuple[MigProfile, int], ...] = ()

    def matches_pci(self, pci_device_id: int, subsystem_id: int | None) -> bool:
        """An empty filter matches every GPU; a list matches when any element does."""
        if not self.device_filter:
            return True
        return any(f.matches(pci_device_id, subsystem_id) for f in self.device_filter)

    def may_match_pci(self, pci_device_id: int) -> bool:
        """Like `matches_pci` for a board whose subsystem is not known: offline, a filter qualified
        by a subsystem (`0x20B010DE:0x147E10DE`) still targets the model with that device id."""
        return not self.device_filter or any(f.may_match(pci_device_id) for f in self.device_filter)

    def matches_index(self, gpu_index: int) -> bool:
        return self.devices == ALL_DEVICES or gpu_index in self.devices

    def selects(self, *, gpu_index: int, pci_device_id: int, subsystem_id: int | None) -> bool:
        return self.matches_index(gpu_index) and self.matches_pci(pci_device_id, subsystem_id)

    @property
    def requested(self) -> tuple[tuple[MigProfile, int], ...]:
        """The profiles with a non-zero count, in file order."""
        return tuple((profile, count) for profile, count in self.mig_devices if count > 0)


@dataclass(frozen=True)
class LayoutFile:
    """A whole file: `path` names it in messages; `configs` keeps the file's order of names."""

    path: str
    configs: Mapping[str, tuple[LayoutEntry, ...]]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.configs)


class PciFilterError(ValueError):
    """A `device-filter` string that is not `0xDDDDVVVV[:0xSSSSVVVV]`."""


def parse_pci_filter(text: str) -> PciFilter:
    """Parse one filter string; each half is read like Go's `strconv.ParseUint(s, 0, 32)`."""
    parts = text.split(":")
    if len(parts) > 2:
        raise PciFilterError(f"{text!r} has more than one ':'")
    device_vendor = parse_go_uint32(parts[0])
    subsystem = parse_go_uint32(parts[1]) if len(parts) == 2 else None
    return PciFilter(device_vendor=device_vendor, subsystem=subsystem)


def parse_go_uint32(text: str) -> int:
    """`strconv.ParseUint(text, 0, 32)`: 0x/0o/0b prefixes, a bare leading 0 means octal, else decimal.

    Python's `int(text, 0)` follows the same literal rules (underscores between digits included)
    except that it also takes signs and surrounding spaces, and refuses Go's `010` octal form.
    """
    if not text or text != text.strip() or text[0] in "+-":
        raise PciFilterError(f"{text!r} is not an unsigned number")
    try:
        if len(text) > 1 and text[0] == "0" and text[1] not in "xXoObB":
            value = int("0o" + text[1:], 0)
        else:
            value = int(text, 0)
    except ValueError:
        raise PciFilterError(f"{text!r} is not a number (write it as 0xDDDDVVVV)") from None
    if value > _UINT32_MAX:
        raise PciFilterError(f"{text!r} does not fit in 32 bits")
    return value
