"""mig-parted's own spec test inputs (api/spec/v1 spec_test.go and helpers_test.go, v0.15.0), rebuilt.

Those inputs are JSON indented with tabs, some with a trailing comma, read through sigs.k8s.io/yaml.
Each must be read as mig-parted reads it, or refused where migagent is stricter by design (the
docs/layouts.md's "Differences from mig-parted" table); the test name says which.
"""

from __future__ import annotations

import pytest

from migagent.errors import InvalidLayoutError
from migagent.layout.parse import parse_layout
from migagent.layout.spec import ALL_DEVICES, LayoutEntry, LayoutFile, PciFilter

ALL_DISABLED = '{\n\t\t"all-disabled": [{\n\t\t\t"devices": "all",\n\t\t\t"mig-enabled": false\n\t\t}]\n\t}'


def spec_file(body: str) -> str:
    """A top-level test input: `{` then tab-indented fields, as in spec_test.go's TestSpec."""
    return "{\n\t" + body + "\n}"


def entry_file(entry: str) -> str:
    """A TestMigConfigSpec input (one entry object) placed in a file as the only entry of config `c`."""
    return spec_file(f'"version": "v1",\n\t"mig-configs": {{\n\t\t"c": [{entry}]\n\t}}')


def read(text: str) -> LayoutFile:
    return parse_layout(text, source="spec.json")


def refused(text: str) -> str:
    with pytest.raises(InvalidLayoutError) as info:
        read(text)
    return str(info.value)


def only_entry(text: str) -> LayoutEntry:
    (entry,) = read(text).configs["c"]
    return entry


def test_well_formed_tab_indented_json_is_read_like_mig_parted() -> None:
    layout = read(spec_file(f'"version": "v1",\n\t"mig-configs": {ALL_DISABLED}'))
    (entry,) = layout.configs["all-disabled"]
    assert (entry.devices, entry.mig_enabled, entry.device_filter) == (ALL_DEVICES, False, ())


@pytest.mark.parametrize(
    ("case", "body", "says"),
    [
        ("wrong version", f'"version": "v2",\n\t"mig-configs": {ALL_DISABLED}', 'unknown version "v2"'),
        ("only version, wrong", '"version": "v2"', 'unknown version "v2"'),
        ("missing version", f'"mig-configs": {ALL_DISABLED}', "version: missing"),
        ("erroneous field", f'"bogus": "field",\n\t"version": "v1",\n\t"mig-configs": {ALL_DISABLED}',
         'unexpected field "bogus"'),
        ("empty mig-configs", '"version": "v1",\n\t"mig-configs": {}', "at least one config is required"),
    ],
)
def test_top_level_inputs_mig_parted_refuses_are_refused(case: str, body: str, says: str) -> None:
    assert says in refused(spec_file(body)), case


@pytest.mark.parametrize(("case", "text"), [("empty", ""), ("only version", spec_file('"version": "v1"'))])
def test_a_file_without_configs_is_refused_at_load_where_mig_parted_fails_later_by_design(case: str, text: str) -> None:
    # mig-parted loads these and then fails with "selected mig-config not present"; we say it at load.
    assert "spec.json: " in refused(text), case


def test_well_formed_entry_with_counts() -> None:
    entry = only_entry(entry_file('{\n\t\t\t"devices": "all",\n\t\t\t"mig-enabled": true,\n'
                                  '\t\t\t"mig-devices": {\n\t\t\t\t"1g.5gb": 2\n\t\t\t}\n\t\t}'))
    assert [(str(profile), count) for profile, count in entry.mig_devices] == [("1g.5gb", 2)]


def test_a_trailing_comma_in_a_flow_mapping_is_accepted_as_go_yaml_v2_does() -> None:
    entry = only_entry(entry_file('{\n\t\t\t"devices": "all",\n\t\t\t"mig-enabled": false,\n\t\t}'))
    assert entry.mig_enabled is False
    assert entry.mig_devices == ()


def test_devices_as_a_list_of_ints() -> None:
    assert only_entry(entry_file('{"devices": [0,1,2,3], "mig-enabled": false,}')).devices == (0, 1, 2, 3)


@pytest.mark.parametrize(
    ("case", "entry", "says"),
    [
        ("missing devices", '{"mig-enabled": true, "mig-devices": {"1g.5gb": 2}}', "devices: missing"),
        ("missing mig-enabled", '{"devices": "all", "mig-devices": {"1g.5gb": 2}}', "mig-enabled: missing"),
        ("missing mig-devices, enabled", '{"devices": "all", "mig-enabled": true,}', "mig-devices: missing"),
        ("bogus profile", '{"devices": "all", "mig-enabled": true, "mig-devices": {"bogus": 2}}',
         "mig-devices: "),
        ("erroneous field", '{"bogus": "field", "devices": "all", "mig-enabled": false,}', 'unexpected field "bogus"'),
        ("devices string other than all", '{"devices": "bogus", "mig-enabled": false,}', 'got "bogus"'),
        ("devices a mapping", '{"devices": {}, "mig-enabled": false,}', "got {}"),
    ],
)
def test_entry_inputs_mig_parted_refuses_are_refused_naming_the_field(case: str, entry: str, says: str) -> None:
    message = refused(entry_file(entry))
    assert message.startswith("spec.json: mig-configs.c[0]"), case
    assert says in message, case


@pytest.mark.parametrize("single", ['"MODEL"', '["MODEL1", "MODEL2"]'])
def test_a_model_name_filter_mig_parted_silently_never_matches_is_refused_by_design(single: str) -> None:
    message = refused(entry_file(f'{{"device-filter": {single}, "devices": "all", "mig-enabled": false}}'))
    assert "invalid PCI id filter" in message
    assert "0xDDDDVVVV" in message


# helpers_test.go: TestMigConfigSpecMatchesDeviceFilter, on an H100 0x233010DE with subsystem 0x16C010DE.
H100, H100_SUBSYSTEM = 0x233010DE, 0x16C010DE


@pytest.mark.parametrize(
    ("case", "filter_json", "matches"),
    [
        ("empty filter matches all devices", '""', True),
        ("primary-only filter matches subsystem-aware hardware", '"0x233010DE"', True),
        ("matching subsystem filter matches hardware", '"0x233010DE:0x16C010DE"', True),
        ("sibling subsystem filter does not match hardware", '"0x233010DE:0x16C110DE"', False),
        ("multiple filters stop at a matching subsystem entry", '["0x233010DE:0x16C110DE", "0x233010DE:0x16C010DE"]',
         True),
        ("an empty list matches all devices", "[]", True),
        ("null matches all devices", "null", True),
    ],
)
def test_device_filters_match_as_in_mig_parted(case: str, filter_json: str, matches: bool) -> None:
    entry = only_entry(entry_file(f'{{"device-filter": {filter_json}, "devices": "all", "mig-enabled": false}}'))
    assert entry.matches_pci(H100, H100_SUBSYSTEM) is matches, case


def test_a_filter_with_extra_separators_is_refused_where_mig_parted_never_matches_it_by_design() -> None:
    message = refused(entry_file('{"device-filter": "0x233010DE:0x16C010DE:extra", "devices": "all", '
                                 '"mig-enabled": false}'))
    assert "more than one ':'" in message


def test_block_style_yaml_of_the_round_trip_test_reads_back() -> None:
    # TestMarshallUnmarshall's shape as go-yaml writes it: keys sorted, flow-style devices and filters.
    text = (
        "mig-configs:\n  half-disabled-half-balanced-slices:\n"
        '  - device-filter: ["0x20B010DE", "0x20B110DE"]\n    devices: [0, 1, 2, 3]\n    mig-enabled: false\n'
        '  - device-filter: ["0x20B010DE"]\n    devices: [4, 5, 6, 7]\n    mig-devices:\n'
        "      1g.5gb: 2\n      2g.10gb: 1\n      3g.20gb: 1\n    mig-enabled: true\nversion: v1\n"
    )
    disabled, balanced = read(text).configs["half-disabled-half-balanced-slices"]
    assert disabled.device_filter == (PciFilter(0x20B010DE), PciFilter(0x20B110DE))
    assert balanced.devices == (4, 5, 6, 7)
    assert [count for _, count in balanced.mig_devices] == [2, 1, 1]


def test_an_unquoted_hex_filter_reads_as_a_number_which_mig_parted_refuses_too() -> None:
    message = refused(entry_file('{"device-filter": [0x20B010DE], "devices": "all", "mig-enabled": false}'))
    assert "YAML read an unquoted number (548409566); quote the PCI id" in message
