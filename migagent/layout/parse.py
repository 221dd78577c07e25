"""Read mig-parted v1 layout files strictly (docs/mig-parted.md §1, §2).

Values arrive as mig-parted's own `UnmarshalJSON` sees them (`strict_yaml`: YAML 1.1 by go-yaml v2's
rules, then JSON), so `mig-enabled: y`, `devices: [1.0]` and a config named `1:` read as they do
there. Every problem in a file is collected and reported at once, one per line, each naming the
file and the path to the field (`layouts.yaml: mig-configs.all-balanced[1].devices: ...`) and saying
what would be valid. Where mig-parted would silently do something other than what the file seems to
say we refuse instead; docs/layouts.md's "Differences from mig-parted" table lists each case and why.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Literal

from migagent.durable import read_bounded
from migagent.errors import InvalidLayoutError
from migagent.layout.profile import MigProfile, ProfileNameError
from migagent.layout.spec import ALL_DEVICES, LayoutEntry, LayoutFile, PciFilter, PciFilterError, parse_pci_filter
from migagent.layout.strict_yaml import JsonKey, YamlSyntaxError, gc_paused, load_strict, path_part

SUPPORTED_VERSION = "v1"
TOP_LEVEL_FIELDS = ("version", "mig-configs")
ENTRY_FIELDS = ("devices", "device-filter", "mig-enabled", "mig-devices")
_MISSING = object()
_FILTER_HINT = 'expected "0xDDDDVVVV" or "0xDDDDVVVV:0xSSSSVVVV" (device+vendor[:subsystem]), e.g. "0x20B710DE"'


MAX_REPORTED_PROBLEMS = 20


class _Problems:
    """Collects the errors in one file, so a user fixes them in one pass; the first
    MAX_REPORTED_PROBLEMS are shown and the rest counted (a broken generator can write thousands)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: list[str] = []
        self.count = 0

    def add(self, path: str, message: str) -> None:
        self.count += 1
        if len(self.lines) < MAX_REPORTED_PROBLEMS:
            self.lines.append(f"{self.source}: {path}: {message}" if path else f"{self.source}: {message}")

    def raise_if_any(self) -> None:
        if self.count:
            raise InvalidLayoutError(cap_problems(self.lines, total=self.count, source=self.source))


def cap_problems(lines: list[str], *, total: int | None = None, source: str = "") -> str:
    """The first MAX_REPORTED_PROBLEMS lines, and a last one saying how many more there were."""
    total = len(lines) if total is None else total
    shown = lines[:MAX_REPORTED_PROBLEMS]
    rest = total - len(shown)
    more = f"{source}: " if source else ""
    return "\n".join(shown + ([f"{more}... and {rest} more problem(s) not shown"] if rest > 0 else []))


def parse_layout(text: str, *, source: str) -> LayoutFile:
    """Parse the text of a layout file; `source` names it in messages. Raises `InvalidLayoutError`."""
    with gc_paused():
        return _parse_layout(text, source=source)


def _parse_layout(text: str, *, source: str) -> LayoutFile:
    problems = _Problems(source)
    try:
        data, yaml_problems = load_strict(text)
    except YamlSyntaxError as exc:
        raise InvalidLayoutError(f"{source}: {exc}") from exc
    for problem in yaml_problems:
        problems.add(problem.path, problem.message)
    # What the YAML means is in doubt: checking the schema on top would only add echoes.
    problems.raise_if_any()
    configs = _read_document(data, problems)
    problems.raise_if_any()
    return LayoutFile(path=source, configs=configs)


def load_layout_file(path: str | Path | BinaryIO, *, source: str | None = None) -> LayoutFile:
    """Read (bounded: durable.read_bounded) and parse a layout file from disk, or from a stream (stdin)."""
    source = source or str(path)
    try:
        data = read_bounded(path)
    except OSError as exc:
        raise InvalidLayoutError(f"{source}: cannot read layout file: {exc}") from exc
    return parse_layout_bytes(data, source=source)


def parse_layout_bytes(data: bytes, *, source: str) -> LayoutFile:
    """Parse a layout file's bytes as read from disk (UTF-8); `source` names it in messages."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidLayoutError(f"{source}: cannot read layout file: {exc}") from exc
    return parse_layout(text, source=source)


def select_config(layout: LayoutFile, name: str | None) -> tuple[LayoutEntry, ...]:
    """The entries of config `name`; `None` is allowed only when the file holds exactly one config."""
    if name is None:
        if len(layout.configs) == 1:
            return next(iter(layout.configs.values()))
        raise InvalidLayoutError(
            f"{layout.path}: no config selected, and the file holds more than one;"
            f" choose one of {some_names(layout.names)}"
        )
    if not name:  # `-c ''`, or MIG_PARTED_SELECTED_CONFIG set to nothing
        raise InvalidLayoutError(
            f"{layout.path}: the selected config name is empty; choose one of {some_names(layout.names)}"
        )
    if name not in layout.configs:
        close = difflib.get_close_matches(name, layout.names, n=_CLOSEST, cutoff=0.6)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise InvalidLayoutError(
            f"{layout.path}: selected mig-config not present: {name}; {hint}the file holds {some_names(layout.names)}"
        )
    return layout.configs[name]


_CLOSEST = 3
_SHOWN = 6


def some_names(names: Sequence[str]) -> str:
    """A few config names and how many more: a file of 81 configs named in full drowns the answer."""
    if len(names) <= _SHOWN:
        return ", ".join(names)
    return f"{len(names)} configs: {', '.join(names[:_SHOWN])} and {len(names) - _SHOWN} more"


def _show(value: object) -> str:
    """A value as the user wrote it, near enough: JSON spelling, shortened."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


# A Kubernetes label value (nvidia.com/mig.config names the config): ASCII only, so a look-alike letter
# (Cyrillic "а") or a zero-width space cannot hide in a name that reads like another.
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def _config_name_problem(name: JsonKey) -> str | None:
    """Why a config name cannot be used as written: YAML read it as a boolean or number mig-parted
    renames, or no node label can carry it."""
    if name.kind == "bool":
        return (f"config name {name.spelling} is a YAML 1.1 boolean, which mig-parted renames to "
                f"{json.dumps(str(name))}; quote it: {json.dumps(name.spelling)}")
    if name.kind != "str" and name != name.spelling:
        return (f"config name {name.spelling} is a YAML number that mig-parted reads as config "
                f"{json.dumps(str(name))}; quote it to keep the name as written: {json.dumps(name.spelling)}")
    if _LABEL_VALUE.fullmatch(name) is None:
        return (f"config name {json.dumps(str(name))} cannot be a node label value, so no node can select it: at"
                " most 63 ASCII letters, digits, '-', '_' and '.', starting and ending with a letter or digit")
    return None


def _as_count(value: object) -> int | None:
    """An integer as Go's JSON decoder takes it: YAML's 7.0 or 1e3 is written to JSON as 7 or 1000."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return None


def _unknown_fields(
    mapping: dict[object, object], *, path: str, allowed: tuple[str, ...], problems: _Problems
) -> None:
    for key in mapping:
        if key in allowed:
            continue
        close = difflib.get_close_matches(str(key), allowed, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        problems.add(path, f"unexpected field {_show(key)}; {hint}valid fields here: {', '.join(allowed)}")


def _read_document(data: object, problems: _Problems) -> dict[str, tuple[LayoutEntry, ...]]:
    if data is None:
        problems.add("", "the file is empty; expected 'version: v1' and a 'mig-configs' mapping")
        return {}
    if not isinstance(data, dict):
        problems.add("", f"expected a mapping with 'version' and 'mig-configs' at the top, got {_show(data)}")
        return {}
    _unknown_fields(data, path="", allowed=TOP_LEVEL_FIELDS, problems=problems)
    version = data.get("version", _MISSING)
    if version is _MISSING:
        problems.add("version", f"missing; expected version: {SUPPORTED_VERSION}")
    elif version != SUPPORTED_VERSION:
        problems.add("version", f"unknown version {_show(version)}; expected version: {SUPPORTED_VERSION}")
    return _read_configs(data.get("mig-configs", _MISSING), problems)


def _read_configs(value: object, problems: _Problems) -> dict[str, tuple[LayoutEntry, ...]]:
    path = "mig-configs"
    expected = "expected a mapping of config name -> list of entries"
    if value is _MISSING:
        problems.add(path, f"missing; {expected}")
        return {}
    if not isinstance(value, dict):
        problems.add(path, f"{expected}, got {_show(value)}")
        return {}
    if not value:
        problems.add(path, f"at least one config is required; {expected}")
    configs: dict[str, tuple[LayoutEntry, ...]] = {}
    for name, entries in value.items():
        refusal = _config_name_problem(name) if isinstance(name, JsonKey) else f"config name {name!r} is not text"
        if refusal is not None:
            problems.add(path, refusal)
            continue
        configs[name] = _read_entries(entries, path=f"{path}.{path_part(name)}", problems=problems)
    return configs


def _read_entries(value: object, *, path: str, problems: _Problems) -> tuple[LayoutEntry, ...]:
    if not isinstance(value, list) or not value:
        problems.add(path, f"expected a non-empty list of entries (at least one is required), got {_show(value)}")
        return ()
    entries = (_read_entry(raw, index=i, path=f"{path}[{i}]", problems=problems) for i, raw in enumerate(value))
    return tuple(entry for entry in entries if entry is not None)


def _read_entry(raw: object, *, index: int, path: str, problems: _Problems) -> LayoutEntry | None:
    if not isinstance(raw, dict):
        problems.add(path, f"expected a mapping with {', '.join(ENTRY_FIELDS)}, got {_show(raw)}")
        return None
    before = problems.count
    _unknown_fields(raw, path=path, allowed=ENTRY_FIELDS, problems=problems)
    devices = _read_devices(raw.get("devices", _MISSING), path=f"{path}.devices", problems=problems)
    device_filter = _read_filter(raw.get("device-filter", _MISSING), path=f"{path}.device-filter", problems=problems)
    enabled = _read_enabled(raw.get("mig-enabled", _MISSING), path=f"{path}.mig-enabled", problems=problems)
    mig_devices = _read_mig_devices(
        raw.get("mig-devices", _MISSING), enabled=enabled, path=f"{path}.mig-devices", problems=problems
    )
    if problems.count > before or devices is None or enabled is None:
        return None
    return LayoutEntry(
        index=index, devices=devices, device_filter=device_filter, mig_enabled=enabled, mig_devices=mig_devices
    )


def _read_devices(
    value: object, *, path: str, problems: _Problems
) -> Literal["all"] | tuple[int, ...] | None:
    expected = 'expected "all" or a non-empty list of GPU indices such as [0, 1]'
    if value is _MISSING:
        problems.add(path, f"missing; {expected}")
        return None
    if value == ALL_DEVICES:
        return ALL_DEVICES
    if not isinstance(value, list) or not value:
        problems.add(path, f"{expected}, got {_show(value)}")
        return None
    indices = [_as_count(item) for item in value]
    bad = [(i, item) for i, (item, index) in enumerate(zip(value, indices, strict=True)) if index is None or index < 0]
    for i, item in bad:
        problems.add(f"{path}[{i}]", f"expected a GPU index (an integer >= 0), got {_show(item)}")
    return None if bad else tuple(index for index in indices if index is not None)


def _read_filter(value: object, *, path: str, problems: _Problems) -> tuple[PciFilter, ...]:
    # mig-parted treats "", [] and null (`device-filter:` with nothing after it) as no filter.
    if value is _MISSING or value is None or value in ("", []):
        return ()
    if not isinstance(value, list):
        parsed = _read_filter_item(value, path=path, problems=problems)
        return () if parsed is None else (parsed,)
    items = [_read_filter_item(item, path=f"{path}[{i}]", problems=problems) for i, item in enumerate(value)]
    return tuple(item for item in items if item is not None)


def _read_filter_item(value: object, *, path: str, problems: _Problems) -> PciFilter | None:
    if _as_count(value) is not None:
        problems.add(path, f"YAML read an unquoted number ({value}); quote the PCI id: {_FILTER_HINT}")
        return None
    if not isinstance(value, str):
        problems.add(path, f"expected a PCI id string or a list of them; {_FILTER_HINT}; got {_show(value)}")
        return None
    try:
        return parse_pci_filter(value)
    except PciFilterError as exc:
        problems.add(path, f"invalid PCI id filter: {exc}; {_FILTER_HINT}")
        return None


def _read_enabled(value: object, *, path: str, problems: _Problems) -> bool | None:
    if value is _MISSING:
        problems.add(path, "missing; expected true or false")
        return None
    if value is None:
        problems.add(path, "expected true or false, got null (mig-parted would read an empty value as false; write it)")
        return None
    if not isinstance(value, bool):
        problems.add(path, f"expected true or false, got {_show(value)}")
        return None
    return value


def _read_mig_devices(
    value: object, *, enabled: bool | None, path: str, problems: _Problems
) -> tuple[tuple[MigProfile, int], ...]:
    expected = 'expected a mapping of MIG profile -> count, e.g. {"1g.10gb": 7}, or {} for no instances'
    if value is _MISSING or (value is None and enabled is False):
        if enabled is True:
            problems.add(path, f"missing; required when mig-enabled is true; {expected}")
        return ()
    if not isinstance(value, dict):
        problems.add(path, f"{expected}, got {_show(value)}")
        return ()
    if value and enabled is False:
        problems.add(path, "must be absent or {} when mig-enabled is false")
        return ()
    counts = _read_counts(value, path=path, problems=problems)
    if counts and all(count == 0 for _, count in counts):
        problems.add(path, "all counts are 0; give a profile a count above 0, or write {} for no instances")
    return counts


def _read_counts(
    value: dict[object, object], *, path: str, problems: _Problems
) -> tuple[tuple[MigProfile, int], ...]:
    counts: list[tuple[MigProfile, int]] = []
    first_spelling: dict[MigProfile, str] = {}
    for key, raw_count in value.items():
        if not isinstance(key, JsonKey) or key.kind != "str":
            problems.add(path, f"profile name {getattr(key, 'spelling', key)} must be a string such as \"1g.10gb\"")
            continue
        try:
            profile = MigProfile.parse(key)
        except ProfileNameError as exc:
            problems.add(path, str(exc))
            continue
        count = _as_count(raw_count)
        if count is None or count < 0:
            problems.add(path, f"profile {key!r}: count must be an integer >= 0, got {_show(raw_count)}")
            continue
        if profile in first_spelling:
            problems.add(path, f"profile {key!r} is the same profile as {first_spelling[profile]!r}; list it once")
            continue
        first_spelling[profile] = key
        counts.append((profile, count))
    return tuple(counts)
