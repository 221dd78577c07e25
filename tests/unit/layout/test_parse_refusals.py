"""Every malformed layout is refused with a message naming file, config, entry and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from migagent.errors import InvalidLayoutError
from migagent.layout.parse import load_layout_file, parse_layout

GOOD_ENTRY = '    - {devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 7}}\n'


def refusal(text: str) -> str:
    with pytest.raises(InvalidLayoutError) as info:
        parse_layout(text, source="layouts.yaml")
    return str(info.value)


def second_entry(*lines: str) -> str:
    """A file whose config `cfg` has a good entry 0 and, as entry 1, the given lines."""
    body = "".join(f"      {line}\n" for line in lines[1:])
    return f"version: v1\nmig-configs:\n  cfg:\n{GOOD_ENTRY}    - {lines[0]}\n{body}"


@pytest.mark.parametrize(
    ("lines", "where", "says"),
    [
        (("devices: 7", "mig-enabled: false"), "devices", 'expected "all" or a non-empty list of GPU indices'),
        (("devices: some", "mig-enabled: false"), "devices", 'got "some"'),
        (("devices: []", "mig-enabled: false"), "devices", "got []"),
        (("devices: true", "mig-enabled: false"), "devices", "got true"),
        (("devices: [0, true]", "mig-enabled: false"), "devices[1]",
         "expected a GPU index (an integer >= 0), got true"),
        (("devices: [-1]", "mig-enabled: false"), "devices[0]", "got -1"),
        (("devices: [0.5]", "mig-enabled: false"), "devices[0]", "got 0.5"),
        (("mig-enabled: false",), "devices", 'missing; expected "all"'),
        (("devices: all",), "mig-enabled", "missing; expected true or false"),
        (("devices: all", 'mig-enabled: "true"'), "mig-enabled", 'expected true or false, got "true"'),
        (("devices: all", "mig-enabled: true"), "mig-devices", "missing; required when mig-enabled is true"),
        (("devices: all", "mig-enabled: true", "mig-devices:"), "mig-devices", "got null"),
        (("devices: all", "mig-enabled: true", "mig-devices: [1g.10gb]"), "mig-devices", "expected a mapping"),
        (("devices: all", "mig-enabled: false", 'mig-devices: {"1g.10gb": 7}'), "mig-devices",
         "must be absent or {} when mig-enabled is false"),
        (("devices: all", "mig-enabled: true", 'mig-devices: {"1g.10gb": -1}'), "mig-devices",
         "profile '1g.10gb': count must be an integer >= 0, got -1"),
        (("devices: all", "mig-enabled: true", 'mig-devices: {"1g.10gb": true}'), "mig-devices", "got true"),
        (("devices: all", "mig-enabled: true", 'mig-devices: {"1g.10gb": "7"}'), "mig-devices", 'got "7"'),
        (("devices: all", "mig-enabled: true", 'mig-devices: {"1g.10gb": 1.5}'), "mig-devices", "got 1.5"),
        (("devices: all", "mig-enabled: true", 'mig-devices: {"1g.10gb": 0, "2g.20gb": 0}'), "mig-devices",
         "all counts are 0"),
        (("devices: all", "mig-enabled: true", 'mig-devices: {"1g.10gb": 1, "1c.1g.10gb": 1}'), "mig-devices",
         "profile '1c.1g.10gb' is the same profile as '1g.10gb'"),
        (("devices: all", "mig-enabled: true", "mig-devices: {7: 1}"), "mig-devices", "must be a string"),
        (("devices: all", "mig-enabled: false", "mig-device: {}"), "",
         "unexpected field \"mig-device\"; did you mean 'mig-devices'?"),
        (("devices: all", "mig-enabled: false", 'device-filter: [""]'), "device-filter[0]", "invalid PCI id filter"),
        (("devices: all", "mig-enabled: false", "device-filter: [~]"), "device-filter[0]", "got null"),
        (("devices: all", "mig-enabled: ~"), "mig-enabled", "got null (mig-parted would read an empty value as false"),
        (("devices: all", "mig-enabled: 1"), "mig-enabled", "expected true or false, got 1"),
        (("devices: all", "mig-enabled: true", 'mig-devices: {"1g.10gb": ~}'), "mig-devices", "got null"),
        (("devices: all", "mig-enabled: true", 'mig-devices: {"1g.10gb": 1e21}'), "mig-devices", "got 1e+21"),
        (("devices: [1.5]", "mig-enabled: false"), "devices[0]", "got 1.5"),
        (("devices: all", "mig-enabled: false", 'device-filter: "0xZZ"'), "device-filter", "'0xZZ' is not a number"),
        (("devices: all", "mig-enabled: false", 'device-filter: "0x20B010DE:0x1:0x2"'), "device-filter",
         "more than one ':'"),
        (("devices: all", "mig-enabled: false", 'device-filter: ["0x20B010DE", "0x100000000"]'), "device-filter[1]",
         "does not fit in 32 bits"),
        (("devices: all", "mig-enabled: false", 'device-filter: ["0x20B010DE", " 0x20B110DE"]'),
         "device-filter[1]", "not an unsigned number"),
        (("devices: all", "mig-enabled: false", "device-filter: 0x20B010DE"), "device-filter",
         "YAML read an unquoted number (548409566); quote the PCI id"),
        (("devices: all", "mig-enabled: false", "device-filter: {a: 1}"), "device-filter", 'e.g. "0x20B710DE"'),
    ],
)
def test_a_bad_entry_field_is_refused_naming_file_config_entry_and_field(
    lines: tuple[str, ...], where: str, says: str
) -> None:
    message = refusal(second_entry(*lines))
    path = "mig-configs.cfg[1]" + (f".{where}" if where else "")
    assert message.startswith(f"layouts.yaml: {path}: ")
    assert says in message
    assert len(message.splitlines()) == 1


@pytest.mark.parametrize(
    ("profile", "says"),
    [
        ("1g.10gb+me-x", "'+' and '-' attributes cannot be mixed"),
        ("1g.10gb+me+gfx", "write '+' once and separate attributes with ','"),
        ("1g.10gb+1me", "must start with a letter"),
        ("1g.10gb+me.", "not end with '.'"),
        ("1g.10gb+me,me", "repeated attribute"),
        ("1g.10gb+me,gfx", "unsupported attribute"),
        ("1g.10gb+foo", "valid: +me, +me.all, +gfx, -me"),
        ("1g.10gb-gfx", "unsupported attribute '-gfx'"),
        ("1g.10gb+", "must start with a letter"),
        ("10gb", "expected [<C>c.]<G>g.<GB>gb"),
        ("1g.10GB", "malformed MIG profile"),
        ("2c.1g.10gb", "2c is larger than its 1g GPU instance"),
        ("0g.10gb", "must be positive"),
        ("1g.10gb\n", "malformed MIG profile"),
    ],
)
def test_a_malformed_profile_name_is_refused_with_the_grammar(profile: str, says: str) -> None:
    text = second_entry("devices: all", "mig-enabled: true", f"mig-devices: {{{json.dumps(profile)}: 1}}")
    message = refusal(text)
    assert message.startswith("layouts.yaml: mig-configs.cfg[1].mig-devices: ")
    assert says in message


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "layouts.yaml: the file is empty"),
        ("- 1\n", "layouts.yaml: expected a mapping with 'version' and 'mig-configs' at the top, got [1]"),
        ("mig-configs:\n  cfg:\n" + GOOD_ENTRY, "layouts.yaml: version: missing; expected version: v1"),
        ("version: v2\nmig-configs:\n  cfg:\n" + GOOD_ENTRY, 'layouts.yaml: version: unknown version "v2"'),
        ("version: 1\nmig-configs:\n  cfg:\n" + GOOD_ENTRY, "layouts.yaml: version: unknown version 1"),
        ("version: v1\n", "layouts.yaml: mig-configs: missing; expected a mapping of config name"),
        ("version: v1\nmig-configs: {}\n", "layouts.yaml: mig-configs: at least one config is required"),
        ("version: v1\nmig-configs: [a]\n", "layouts.yaml: mig-configs: expected a mapping"),
        ("version: v1\nmig-configs:\n  cfg: []\n", "layouts.yaml: mig-configs.cfg: expected a non-empty list"),
        ("version: v1\nmig-configs:\n  cfg:\n", "layouts.yaml: mig-configs.cfg: expected a non-empty list"),
        ("version: v1\nmig-configs:\n  cfg:\n    - all\n", "layouts.yaml: mig-configs.cfg[0]: expected a mapping"),
        ("version: v1\nmig-configs:\n  off:\n" + GOOD_ENTRY,
         'config name off is a YAML 1.1 boolean, which mig-parted renames to "false"; quote it: "off"'),
        ("version: v1\nflavour: x\nmig-configs:\n  cfg:\n" + GOOD_ENTRY,
         'layouts.yaml: unexpected field "flavour"; valid fields here: version, mig-configs'),
    ],
)
def test_a_bad_file_structure_is_refused_saying_what_is_valid(text: str, says: str) -> None:
    assert says in refusal(text)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("version: v1\nversion: v1\nmig-configs:\n  cfg:\n" + GOOD_ENTRY,
         "layouts.yaml: key 'version' appears more than once (lines 1 and 2)"),
        ("version: v1\nmig-configs:\n  cfg:\n" + GOOD_ENTRY + "  cfg:\n" + GOOD_ENTRY,
         "layouts.yaml: mig-configs: key 'cfg' appears more than once (lines 3 and 5)"),
        ("version: v1\nmig-configs:\n  cfg:\n" + GOOD_ENTRY
         + "    - devices: all\n      mig-enabled: false\n      devices: [0]\n",
         "layouts.yaml: mig-configs.cfg[1]: key 'devices' appears more than once (lines 5 and 7)"),
        ("version: v1\nmig-configs:\n  cfg:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n"
         '        "1g.10gb": 1\n        "1g.10gb": 2\n',
         "layouts.yaml: mig-configs.cfg[0].mig-devices: key '1g.10gb' appears more than once (lines 7 and 8)"),
    ],
)
def test_a_key_written_twice_is_refused_with_both_lines(text: str, says: str) -> None:
    assert says in refusal(text)


def test_a_yaml_syntax_error_is_refused_with_line_and_column() -> None:
    message = refusal("version: v1\nmig-configs:\n  cfg:\n    - devices: [0, 1\n      mig-enabled: false\n")
    assert message.startswith("layouts.yaml: line ")
    assert "column" in message
    assert "invalid YAML" in message


def test_a_python_tag_is_refused_not_executed() -> None:
    message = refusal("version: !!python/object/apply:os.getcwd []\n")
    assert message == (
        "layouts.yaml: version: line 1: tag !!python/object/apply:os.getcwd has no meaning in a layout file; remove it"
    )


def test_several_documents_in_one_file_are_refused_naming_the_second() -> None:
    message = refusal("version: v1\n---\nversion: v1\n")
    assert message.startswith("layouts.yaml: line 2: a second YAML document starts here; mig-parted reads only")


def test_every_error_in_a_file_is_reported_together_one_per_line() -> None:
    text = (
        "version: v2\nmig-configs:\n"
        "  a:\n    - {devices: 7, mig-enabled: false}\n"
        '  b:\n    - {devices: all, mig-enabled: true, mig-devices: {"1g.10gb": -2}}\n'
        '    - {devices: all, mig-enabled: true, device-filter: "zz", mig-devices: {"9x": 1}}\n'
    )
    lines = refusal(text).splitlines()
    assert [line.split(": ")[1] for line in lines] == [
        "version", "mig-configs.a[0].devices", "mig-configs.b[0].mig-devices",
        "mig-configs.b[1].device-filter", "mig-configs.b[1].mig-devices",
    ]
    assert all(line.startswith("layouts.yaml: ") for line in lines)


@pytest.mark.parametrize("name", ["a b", "x" * 64, "\u0430ll-balanced", "all\u200bbalanced", "-3", "all-", ""])
def test_a_config_name_no_node_label_can_carry_is_refused_with_its_look_alikes_spelt_out(name: str) -> None:
    said = refusal(f"version: v1\nmig-configs:\n  {json.dumps(name)}:\n{GOOD_ENTRY}")
    assert f"config name {json.dumps(name)} cannot be a node label value" in said  # \u0430, \u200b: shown as such
    assert said.isascii()


def test_a_config_name_of_63_label_characters_is_valid() -> None:
    name = "a" + "-_." * 20 + "z1"
    assert len(name) == 63
    assert parse_layout(f"version: v1\nmig-configs:\n  {name}:\n{GOOD_ENTRY}", source="l.yaml").names == (name,)


@pytest.mark.parametrize("depth", [99, 300, 5_000, 200_000])
@pytest.mark.parametrize("opening", ["[", "{a: "])
def test_nesting_past_100_levels_is_refused_as_yaml_not_a_recursion_error(depth: int, opening: str) -> None:
    # 100 in all, the two mappings above included: a bound of its own, not Python's recursion limit, which
    # would refuse a depth or not by how deep the caller's stack is.
    closing = "]" if opening == "[" else "}"
    said = refusal(f"version: v1\nmig-configs:\n  c: {opening * depth}1{closing * depth}\n")
    assert said == "layouts.yaml: invalid YAML: lists and mappings nested more than 100 levels deep"
    shallower = refusal(f"version: v1\nmig-configs:\n  c: {opening * 98}1{closing * 98}\n")
    assert "expected a mapping with devices" in shallower or "expected a non-empty list" in shallower


def test_a_file_larger_than_the_limit_is_refused_while_it_is_read() -> None:
    # /dev/zero never ends: only a limit checked while reading stops it (a whole read grew to 23 GB).
    with pytest.raises(InvalidLayoutError) as info:
        load_layout_file("/dev/zero")
    assert str(info.value) == "/dev/zero: cannot read layout file: larger than 16 MiB, the most migagent reads"


def test_an_unreadable_file_is_refused_naming_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(InvalidLayoutError, match=r"nope\.yaml: cannot read layout file"):
        load_layout_file(missing)


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"version: v1\n# caf\xe9\n")
    with pytest.raises(InvalidLayoutError, match=r"latin1\.yaml: cannot read layout file"):
        load_layout_file(path)


def outcome(text: str) -> str:
    """"parsed", or the InvalidLayoutError message; any other exception escapes and fails the test."""
    try:
        parse_layout(text, source="fuzz.yaml")
    except InvalidLayoutError as exc:
        return str(exc)
    return "parsed"


# No deadline: tests assert no wall-clock time, and the pure-Python YAML scan is slow on a loaded machine.
@settings(deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_either_parses_or_raises_invalid_layout_error(text: str) -> None:
    result = outcome(text)
    assert result == "parsed" or result.startswith("fuzz.yaml: ")


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 2**33), st.floats(allow_nan=False), st.text(max_size=12),
    st.sampled_from(["all", "v1", "1g.10gb", "1c.3g.40gb", "0x20B010DE", "devices", "mig-enabled"]),
)
_KEYS = st.sampled_from(
    ["version", "mig-configs", "devices", "device-filter", "mig-enabled", "mig-devices", "cfg", "1g.10gb", "x"]
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4))


@settings(deadline=None)
@given(
    st.fixed_dictionaries(
        {"version": st.sampled_from(["v1", "v2"]), "mig-configs": st.dictionaries(st.text(max_size=5), _VALUES)}
    )
)
def test_arbitrary_structures_never_escape_as_key_or_type_errors(document: dict[str, object]) -> None:
    result = outcome(yaml.safe_dump(document))
    assert result == "parsed" or all(line.startswith("fuzz.yaml: ") for line in result.splitlines())
