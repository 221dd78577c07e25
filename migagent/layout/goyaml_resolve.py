"""Plain YAML scalars read the way mig-parted reads them: go-yaml v2's YAML 1.1 rules, then JSON.

mig-parted parses a layout with sigs.k8s.io/yaml, which decodes YAML with go-yaml v2 and re-encodes
the result as JSON before its own `UnmarshalJSON` sees it. PyYAML's resolver is YAML 1.1 too, but
differs in the corners: go-yaml v2 reads `y`/`n` as booleans, `1e3` and `08` as floats, `0o17` as
an int and `1:30` as a string, where PyYAML does the opposite. These functions are a re-statement
of go-yaml v2's `resolve()` (v2.4, as vendored by mig-parted v0.15.0) and of the JSON step's key
conversion, so our loader sees the same values mig-parted does.
"""

from __future__ import annotations

import functools
import math
import re
import struct
from dataclasses import dataclass

STR = "tag:yaml.org,2002:str"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"
TIMESTAMP = "tag:yaml.org,2002:timestamp"
MERGE = "tag:yaml.org,2002:merge"

_INT64 = (-(2**63), 2**63 - 1)
_UINT64_MAX = 2**64 - 1

# go-yaml v2 resolve.go: the words it looks up before anything else (note `y` and `n`).
_WORDS: dict[str, tuple[str, object]] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), (BOOL, True)),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), (BOOL, False)),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), (NULL, None)),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), (FLOAT, math.nan)),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), (FLOAT, math.inf)),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), (FLOAT, -math.inf)),
}
# go-yaml v2's float pattern, applied after underscores are removed.
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# The layouts go-yaml v2 hands to Go's time.Parse (YYYY-M-D, then an optional time, zone only with 'T').
_GO_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:(?:[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))"
    r"|(?: (\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d+)?))?"
)


@dataclass(frozen=True)
class YamlTimestamp:
    """A plain scalar go-yaml v2 reads as a time (`2024-01-31`): never a string in mig-parted."""

    text: str

    def __str__(self) -> str:
        return self.text


class ScalarTagError(ValueError):
    """An explicitly tagged scalar whose text does not read as that tag (`!!int abc`)."""


def _is_go_timestamp(text: str) -> bool:
    match = _GO_TIMESTAMP.fullmatch(text)
    if match is None:
        return False
    _, month, day, *clock = (int(group) if group else 0 for group in match.groups())
    hour, minute, second = (a + b for a, b in zip(clock[:3], clock[3:], strict=True))  # one triple is 0
    return 1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 60


def go_parse_int(text: str, *, signed: bool) -> int | None:
    """Go's `strconv.ParseInt(text, 0, 64)` (or `ParseUint` when not `signed`) without the range
    check: 0x/0o/0b prefixes in either case, a bare leading 0 meaning octal, digits only."""
    body, negative = text, False
    if signed and body[:1] in ("+", "-"):
        negative, body = body[0] == "-", body[1:]
    if not body:
        return None
    base = 10
    if body[0] == "0":
        prefixes = {"b": 2, "o": 8, "x": 16}
        if len(body) >= 3 and body[1].lower() in prefixes:
            base, body = prefixes[body[1].lower()], body[2:]
        else:
            base, body = 8, body[1:]
    digits = "0123456789abcdef"[:base]
    if not all(ch.lower() in digits for ch in body):
        return None
    value = int(body, base) if body else 0
    return -value if negative else value


def _number(text: str) -> tuple[str, object] | None:
    plain = text.replace("_", "")
    signed = go_parse_int(plain, signed=True)
    if signed is not None and _INT64[0] <= signed <= _INT64[1]:
        return INT, signed
    unsigned = go_parse_int(plain, signed=False)
    if unsigned is not None and unsigned <= _UINT64_MAX:
        return INT, unsigned
    if _GO_FLOAT.fullmatch(plain):
        value = float(plain)
        if not math.isinf(value):  # Go's ParseFloat reports a range error: the text stays a string
            return FLOAT, value
    return None


@functools.lru_cache(maxsize=4096)
def go_resolve(text: str, *, timestamps: bool = True) -> tuple[str, object]:
    """The tag and value go-yaml v2 gives the plain scalar `text` (cached: a layout file repeats a
    few dozen scalars, `all`, `true`, profile names, thousands of times; the values are immutable)."""
    if text in _WORDS:
        return _WORDS[text]
    first = text[0]
    if first == "." and "_" not in text:
        try:
            value = float(text)
        except ValueError:
            return STR, text
        return (STR, text) if math.isinf(value) else (FLOAT, value)
    if first in "+-0123456789":
        if timestamps and _is_go_timestamp(text):
            return TIMESTAMP, YamlTimestamp(text)
        return _number(text) or (STR, text)
    return STR, text


def construct_scalar(tag: str, text: str) -> object:
    """The value of a scalar whose tag is known (resolved from plain text, or written explicitly).

    Like go-yaml v2, an explicit tag is checked against what the text reads as: `!!int "7"` is 7,
    `!!float 7` is 7.0, `!!str 7` is "7", and `!!int abc` is an error.
    """
    if tag == STR:
        return text
    if tag == MERGE:
        return "<<"  # `<<` outside a key position is just text
    read_tag, value = go_resolve(text, timestamps=tag == TIMESTAMP)
    if read_tag == tag:
        return value
    if tag == FLOAT and read_tag == INT:
        return float(value)  # type: ignore[arg-type]
    short = tag.rsplit(":", 1)[-1]
    raise ScalarTagError(f"cannot read {text!r} as !!{short}")


def go_float32_key(value: float) -> str:
    """A float mapping key as sigs.k8s.io/yaml writes it: `strconv.FormatFloat(v, 'g', -1, 32)`."""
    if math.isnan(value):
        return ".nan"
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        single = math.copysign(math.inf, value)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    if single == 0:
        return "-0" if math.copysign(1.0, single) < 0 else "0"
    # The fewest significant digits that read back as the same float32.
    for precision in range(1, 10):
        mantissa, exponent = f"{single:.{precision - 1}e}".split("e")
        if struct.unpack("f", struct.pack("f", float(f"{mantissa}e{exponent}")))[0] == single:
            break
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    exp = int(exponent)
    if exp < -4 or exp >= 6:  # Go's shortest 'g' switches to an exponent outside this range
        point = f"{digits[0]}.{digits[1:]}" if len(digits) > 1 else digits
        return f"{sign}{point}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if exp < 0:
        return f"{sign}0.{'0' * (-exp - 1)}{digits}"
    whole = digits[: exp + 1].ljust(exp + 1, "0")
    fraction = digits[exp + 1 :]
    return f"{sign}{whole}.{fraction}" if fraction else f"{sign}{whole}"
