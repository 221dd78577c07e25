"""The loader reads layouts through mig-parted's pipeline (go-yaml v2's YAML 1.1, then JSON).

First what mig-parted accepts and we read the same; then each deliberate refusal, with its message
(docs/layouts.md's "Differences from mig-parted" table has one row per refusal here).
"""

from __future__ import annotations

import pytest

from migagent.errors import InvalidLayoutError
from migagent.layout.parse import parse_layout
from migagent.layout.profile import MigProfile
from migagent.layout.spec import ALL_DEVICES, LayoutEntry, LayoutFile, PciFilter

HEAD = "version: v1\nmig-configs:\n"


def read(text: str) -> LayoutFile:
    return parse_layout(text, source="l.yaml")


def refused(text: str) -> str:
    with pytest.raises(InvalidLayoutError) as info:
        read(text)
    return str(info.value)


def entry(fields: str) -> LayoutEntry:
    """The only entry of config `c`, written as a flow mapping with `fields`."""
    (only,) = read(f"{HEAD}  c:\n    - {{{fields}}}\n").configs["c"]
    return only


@pytest.mark.parametrize("word", ["y", "Y", "yes", "Yes", "on", "ON", "true", "True"])
def test_yaml_1_1_true_words_enable_mig(word: str) -> None:
    assert entry(f"devices: all, mig-enabled: {word}, mig-devices: {{}}").mig_enabled is True


@pytest.mark.parametrize("word", ["n", "N", "no", "NO", "off", "Off", "false", "FALSE"])
def test_yaml_1_1_false_words_disable_mig(word: str) -> None:
    assert entry(f"devices: all, mig-enabled: {word}").mig_enabled is False


@pytest.mark.parametrize(("count", "value"), [("7.0", 7), ("7.", 7), ("7e0", 7), ("0x7", 7), ("07", 7), ("0b111", 7),
                                              ("0o7", 7), ("+7", 7), ("7_0", 70), ("1.0e1", 10)])
def test_counts_take_every_spelling_go_yaml_reads_as_an_integral_number(count: str, value: int) -> None:
    assert entry(f'devices: all, mig-enabled: true, mig-devices: {{"1g.10gb": {count}}}').mig_devices == (
        (MigProfile.parse("1g.10gb"), value),
    )


def test_gpu_indices_take_integral_floats_hex_and_octal() -> None:
    assert entry("devices: [0.0, 0x1, 02, 1_0, 08], mig-enabled: false").devices == (0, 1, 2, 10, 8)


def test_devices_all_may_be_quoted_and_a_duplicate_index_is_kept() -> None:
    assert entry('devices: "all", mig-enabled: false').devices == ALL_DEVICES
    assert entry("devices: [1, 1], mig-enabled: false").devices == (1, 1)


@pytest.mark.parametrize("written", ['""', "''", "[]", "~", "null", ""])
def test_an_empty_device_filter_is_no_filter(written: str) -> None:
    only = entry(f"device-filter: {written}, devices: all, mig-enabled: false")
    assert only.device_filter == ()
    assert only.matches_pci(0x12345678, None)


def test_block_and_flow_styles_quoted_keys_and_null_mig_devices_read_the_same() -> None:
    block = read(HEAD + '  "c":\n    - "devices": all\n      \'mig-enabled\': false\n      mig-devices: ~\n')
    flow = read('{version: v1, mig-configs: {c: [{devices: all, mig-enabled: false}]}}')
    assert block.configs == flow.configs


@pytest.mark.parametrize(("written", "name"), [("1", "1"), ("42", "42"), ("'010'", "010"),
                                               ('"yes"', "yes"), ("1.5", "1.5")])
def test_a_config_name_read_as_a_number_is_that_numbers_json_text(written: str, name: str) -> None:
    layout = read(f"{HEAD}  {written}:\n    - {{devices: all, mig-enabled: false}}\n")
    assert layout.names == (name,)


def test_a_merge_followed_by_an_overriding_key_takes_the_written_key() -> None:
    layout = read(
        HEAD + "  base:\n    - &entry {devices: all, mig-enabled: true, mig-devices: {\"1g.10gb\": 7}}\n"
        "  first-gpu:\n    - <<: *entry\n      devices: [1]\n"
        "  defaults-from-two:\n    - <<: [{devices: [3]}, *entry]\n"
    )
    (first_gpu,) = layout.configs["first-gpu"]
    assert first_gpu.devices == (1,)
    assert first_gpu.mig_devices == ((MigProfile.parse("1g.10gb"), 7),)
    (merged,) = layout.configs["defaults-from-two"]
    assert (merged.devices, merged.mig_enabled) == ((3,), True)  # earlier mappings in a merge list win


def test_anchors_may_be_redefined_and_an_alias_takes_the_latest_as_in_go_yaml_v2() -> None:
    layout = read(
        HEAD + "  a:\n    - &e {devices: all, mig-enabled: false}\n"
        "  b:\n    - &e {devices: [0], mig-enabled: false}\n  c:\n    - *e\n"
    )
    assert layout.configs["c"][0].devices == (0,)


def test_a_tab_after_a_value_and_a_tab_separated_comment_are_blanks() -> None:
    layout = read(f"{HEAD}  c:\n    - devices: all\t# every GPU\n      mig-enabled: false\t\n")
    assert layout.configs["c"][0].devices == ALL_DEVICES


def test_a_subsystem_qualified_and_decimal_filter_parse_like_go_parseuint() -> None:
    only = entry('device-filter: ["0x233010DE:0x16C010DE", "548409566"], devices: all, mig-enabled: false')
    assert only.device_filter == (PciFilter(0x233010DE, 0x16C010DE), PciFilter(0x20B010DE))


# Deliberate refusals: each would make mig-parted silently do something other than the file seems to say.

@pytest.mark.parametrize(
    ("text", "says"),
    [
        (HEAD + "  y:\n    - {devices: all, mig-enabled: false}\n",
         'config name y is a YAML 1.1 boolean, which mig-parted renames to "true"; quote it: "y"'),
        (HEAD + "  010:\n    - {devices: all, mig-enabled: false}\n",
         'config name 010 is a YAML number that mig-parted reads as config "8"; quote it'),
        (HEAD + "  0x10:\n    - {devices: all, mig-enabled: false}\n", 'reads as config "16"'),
        (HEAD + "  1.0:\n    - {devices: all, mig-enabled: false}\n", 'reads as config "1"'),
        (HEAD + "  1e3:\n    - {devices: all, mig-enabled: false}\n", 'reads as config "1000"'),
    ],
)
def test_a_config_name_mig_parted_would_rename_is_refused(text: str, says: str) -> None:
    assert says in refused(text)


def test_a_key_written_twice_is_refused_even_when_spelled_differently() -> None:
    message = refused(HEAD + "  1:\n    - {devices: all, mig-enabled: false}\n"
                      "  0x1:\n    - {devices: all, mig-enabled: false}\n")
    assert "mig-configs: key '1' appears more than once (lines 3 and 5); 0x1 and 1 are all the key '1'" in message


def test_duplicate_keys_in_a_json_file_are_refused() -> None:
    message = refused('{"version": "v1",\n "version": "v1", "mig-configs": {"c": [{"devices": "all", '
                      '"mig-enabled": false}]}}')
    assert "key 'version' appears more than once (lines 1 and 2)" in message


def test_a_key_written_before_a_merge_that_sets_it_is_refused_since_go_yaml_v2_lets_the_merge_win() -> None:
    message = refused(HEAD + "  a:\n    - &e {devices: all, mig-enabled: false}\n"
                      "  b:\n    - devices: [1]\n      <<: *e\n")
    assert message == (
        "l.yaml: mig-configs.b[0]: line 7: key 'devices' (line 6) is written before a '<<' merge that also sets "
        "it; mig-parted keeps the merged value, YAML's merge rule the written one: write the key after the merge"
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (HEAD + "  ~:\n    - {devices: all, mig-enabled: false}\n", "key '~' reads as null"),
        (HEAD + "  2024-01-31:\n    - {devices: all, mig-enabled: false}\n", "key '2024-01-31' reads as a timestamp"),
        (HEAD + "  [a]:\n    - {devices: all, mig-enabled: false}\n", "a mapping key must be a plain value"),
        (HEAD + "  c: &c\n    - {devices: all, mig-enabled: false, x: *c}\n", "an alias refers to a node that "
                                                                             "contains it"),
        (HEAD + "  c:\n    - {devices: !!int x, mig-enabled: false}\n", "cannot read 'x' as !!int"),
        (HEAD + "  c:\n    - !foo {devices: all, mig-enabled: false}\n", "tag !foo has no meaning"),
        (HEAD + "  c:\n    - <<: 1\n      mig-enabled: false\n", "a '<<' merge takes a mapping"),
    ],
)
def test_yaml_mig_parted_cannot_turn_into_json_or_that_means_nothing_there_is_refused(text: str, says: str) -> None:
    assert says in refused(text)


def test_a_json_only_slash_escape_is_refused_as_go_yaml_v2_refuses_it() -> None:
    assert "found unknown escape character '/'" in refused('{"version": "v\\/1"}')


def test_aliases_that_expand_without_bound_are_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 7)]
    assert "expands to more than 200000 values through aliases" in refused("\n".join(lines) + "\n")


def test_the_second_document_is_named_not_ignored() -> None:
    message = refused(HEAD + "  c:\n    - {devices: all, mig-enabled: false}\n---\nversion: v1\n")
    assert message.startswith("l.yaml: line 5: a second YAML document starts here; mig-parted reads only the first")
