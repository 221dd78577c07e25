"""MIG profile names: parse, format and derive them exactly as mig-parted (go-nvlib) does.

Grammar (docs/mig-parted.md §2): `[<C>c.]<G>g.<GB>gb[(+|-)<attr>[,<attr>...]]`.
C omitted means C == G (one compute instance filling the GI). Names are derived from GI memory,
never read from NVML, so `1g.10gb` means the same thing on every driver version.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from migagent.catalog.model import CiProfile, GiProfile, MediaAttribute, ProfileTable

_NAME = re.compile(r"^(?:(?P<c>[0-9]+)c\.)?(?P<g>[0-9]+)g\.(?P<gb>[0-9]+)gb(?P<attrs>[+-].*)?$")
_ATTRIBUTE = re.compile(r"^[A-Za-z][A-Za-z0-9.]*$")
KNOWN_POSITIVE_ATTRIBUTES = ("me", "me.all", "gfx")
KNOWN_NEGATIVE_ATTRIBUTES = ("me",)


class ProfileNameError(ValueError):
    """A profile string that does not follow mig-parted's grammar."""


@dataclass(frozen=True, order=True)
class MigProfile:
    """A parsed profile name such as `1c.3g.40gb` or `1g.10gb+me`."""

    g: int
    gb: int
    c: int
    media: MediaAttribute = MediaAttribute.NONE

    @property
    def is_full_gi(self) -> bool:
        return self.c == self.g

    @property
    def gi_name(self) -> str:
        """The GI part of the name (`3g.40gb` for `1c.3g.40gb`), with its media attribute."""
        return f"{self.g}g.{self.gb}gb{self.media.value}"

    def __str__(self) -> str:
        prefix = "" if self.is_full_gi else f"{self.c}c."
        return f"{prefix}{self.gi_name}"

    @classmethod
    def parse(cls, text: str) -> MigProfile:
        # fullmatch: `$` would also accept a trailing newline ("1g.10gb\n").
        match = _NAME.fullmatch(text)
        if match is None:
            raise ProfileNameError(
                f"malformed MIG profile {text!r}: expected [<C>c.]<G>g.<GB>gb[+me|+me.all|+gfx|-me],"
                " e.g. '1g.10gb', '1c.3g.40gb', '1g.10gb+me'"
            )
        g = int(match["g"])
        c = int(match["c"]) if match["c"] is not None else g
        gb = int(match["gb"])
        if g <= 0 or c <= 0 or gb <= 0:
            raise ProfileNameError(f"malformed MIG profile {text!r}: C, G and GB must be positive")
        if c > g:
            raise ProfileNameError(
                f"malformed MIG profile {text!r}: {c}c is larger than its {g}g GPU instance"
            )
        return cls(g=g, gb=gb, c=c, media=_parse_attributes(text, match["attrs"]))


def _parse_attributes(text: str, attrs: str | None) -> MediaAttribute:
    if not attrs:
        return MediaAttribute.NONE
    sign, body = attrs[0], attrs[1:]
    tokens = body.split(",")
    if sign in body:
        raise ProfileNameError(
            f"malformed MIG profile {text!r}: write '{sign}' once and separate attributes with ','"
        )
    if "+" in body or "-" in body:
        raise ProfileNameError(f"malformed MIG profile {text!r}: '+' and '-' attributes cannot be mixed")
    for token in tokens:
        if not _ATTRIBUTE.match(token) or token.endswith("."):
            raise ProfileNameError(
                f"malformed MIG profile {text!r}: attribute {token!r} must start with a letter, hold only"
                " letters, digits and '.', and not end with '.'"
            )
    if len(set(tokens)) != len(tokens):
        raise ProfileNameError(f"malformed MIG profile {text!r}: repeated attribute")
    known = KNOWN_POSITIVE_ATTRIBUTES if sign == "+" else KNOWN_NEGATIVE_ATTRIBUTES
    if len(tokens) != 1 or tokens[0] not in known:
        valid = ", ".join(
            [f"+{a}" for a in KNOWN_POSITIVE_ATTRIBUTES] + [f"-{a}" for a in KNOWN_NEGATIVE_ATTRIBUTES]
        )
        raise ProfileNameError(f"unsupported attribute {attrs!r} in MIG profile {text!r}; valid: {valid}")
    return MediaAttribute(sign + tokens[0])


def derived_memory_gb(gi_memory_mb: int, total_memory_mb: int) -> int:
    """GI memory in whole GB as go-nvlib's getMigMemorySizeGB computes it.

    The GI's share of device memory is rounded *up* to eighths, then scaled by the device's total
    memory in GiB (rounded up), then rounded half away from zero. That is why `7g.80gb` is the name
    on an 80 GB part whose 7g GI holds 79.25 GiB.
    """
    fraction = math.ceil(gi_memory_mb / total_memory_mb * 8) / 8
    total_gib = math.ceil(total_memory_mb / 1024)
    return math.floor(fraction * total_gib + 0.5)


def gi_profile_name(gi: GiProfile, table: ProfileTable) -> MigProfile:
    gb = derived_memory_gb(gi.memory_mb, table.total_memory_mb)
    return MigProfile(g=gi.slices, gb=gb, c=gi.slices, media=gi.media)


def ci_profile_name(gi: GiProfile, ci: CiProfile, table: ProfileTable) -> MigProfile:
    """The name of a CI inside a GI: the default (full) CI carries the GI's own name."""
    base = gi_profile_name(gi, table)
    c = gi.slices if ci.is_default else ci.slices
    return MigProfile(g=base.g, gb=base.gb, c=c, media=base.media)
