"""Files written for mig-parted parse into the same structure here."""

from __future__ import annotations

import pytest

from migagent.catalog import MediaAttribute
from migagent.errors import InvalidLayoutError
from migagent.layout.parse import load_layout_file, parse_layout, select_config
from migagent.layout.profile import MigProfile
from migagent.layout.spec import ALL_DEVICES, LayoutFile, PciFilter
from tests.unit.layout.support import MIG_PARTED_STYLE

P = MigProfile.parse


@pytest.fixture(scope="module")
def layout() -> LayoutFile:
    return load_layout_file(MIG_PARTED_STYLE)


def test_config_names_keep_the_files_order(layout: LayoutFile) -> None:
    assert layout.names == (
        "all-disabled", "all-enabled", "all-1g.5gb", "all-1g.5gb.me", "all-1g.10gb",
        "all-2g.12gb.me", "all-1g.24gb-me", "all-balanced", "custom-config",
    )
    assert layout.path == str(MIG_PARTED_STYLE)


def test_all_disabled_is_one_unfiltered_entry_for_every_gpu(layout: LayoutFile) -> None:
    (entry,) = layout.configs["all-disabled"]
    assert entry.devices == ALL_DEVICES
    assert entry.device_filter == ()
    assert entry.mig_enabled is False
    assert entry.mig_devices == ()


def test_all_enabled_with_an_empty_map_enables_mig_without_instances(layout: LayoutFile) -> None:
    (entry,) = layout.configs["all-enabled"]
    assert entry.mig_enabled is True
    assert entry.mig_devices == ()


def test_a_count_that_differs_by_model_reads_as_two_filtered_entries(layout: LayoutFile) -> None:
    forty, eighty = layout.configs["all-1g.10gb"]
    assert (forty.index, eighty.index) == (0, 1)
    assert forty.device_filter == tuple(
        PciFilter(pci) for pci in (0x20B010DE, 0x20B110DE, 0x20F110DE, 0x20F610DE)
    )
    assert len(eighty.device_filter) == 8
    assert forty.mig_devices == ((P("1g.10gb"), 4),)
    assert eighty.mig_devices == ((P("1g.10gb"), 7),)


def test_all_balanced_keeps_one_entry_per_filter_group_and_a_single_string_filter(layout: LayoutFile) -> None:
    entries = layout.configs["all-balanced"]
    assert len(entries) == 5
    assert entries[2].device_filter == (PciFilter(0x20B710DE),)
    assert entries[2].mig_devices == ((P("1g.6gb"), 2), (P("2g.12gb"), 1))
    assert [profile for profile, _ in entries[4].mig_devices] == [P("1g.18gb"), P("2g.35gb"), P("3g.71gb")]


def test_attributes_parse_into_media_flavours(layout: LayoutFile) -> None:
    assert layout.configs["all-1g.5gb.me"][0].mig_devices == ((MigProfile(1, 5, 1, MediaAttribute.ME), 1),)
    assert layout.configs["all-1g.24gb-me"][0].mig_devices[0][0].media is MediaAttribute.NO_ME
    assert layout.configs["all-2g.12gb.me"][0].mig_devices[0][0] == MigProfile(2, 12, 2, MediaAttribute.ME)


def test_custom_config_lists_gpu_indices_and_keeps_profile_order(layout: LayoutFile) -> None:
    disabled, balanced, split = layout.configs["custom-config"]
    assert disabled.devices == (0, 1)
    assert disabled.mig_enabled is False
    assert balanced.devices == (2,)
    assert split.devices == (3,)
    assert split.mig_devices == ((P("1c.3g.20gb"), 3), (P("3g.20gb"), 1))
    assert split.mig_devices[0][0].c == 1


def test_entry_selection_combines_indices_and_filters(layout: LayoutFile) -> None:
    forty = layout.configs["all-1g.10gb"][0]
    assert forty.selects(gpu_index=5, pci_device_id=0x20F110DE, subsystem_id=None)
    assert not forty.selects(gpu_index=5, pci_device_id=0x20B210DE, subsystem_id=None)
    disabled = layout.configs["custom-config"][0]
    assert disabled.selects(gpu_index=1, pci_device_id=0x12345678, subsystem_id=7)
    assert not disabled.selects(gpu_index=2, pci_device_id=0x20B010DE, subsystem_id=None)


def test_zero_counts_are_kept_in_the_file_but_not_requested() -> None:
    text = (
        "version: v1\nmig-configs:\n  c:\n"
        '    - {devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 0, "2g.10gb": 1}}\n'
    )
    (entry,) = parse_layout(text, source="layouts.yaml").configs["c"]
    assert entry.mig_devices == ((P("1g.5gb"), 0), (P("2g.10gb"), 1))
    assert entry.requested == ((P("2g.10gb"), 1),)


def test_null_mig_devices_under_disabled_mig_reads_as_absent() -> None:
    text = "version: v1\nmig-configs:\n  disabled:\n    - devices: all\n      mig-enabled: false\n      mig-devices:\n"
    (entry,) = parse_layout(text, source="layouts.yaml").configs["disabled"]
    assert entry.mig_devices == ()


def test_select_config_returns_the_named_entries(layout: LayoutFile) -> None:
    assert select_config(layout, "all-balanced") is layout.configs["all-balanced"]


def test_select_config_names_the_missing_config_and_lists_the_available_ones(layout: LayoutFile) -> None:
    with pytest.raises(InvalidLayoutError) as info:
        select_config(layout, "all-3g.99gb")
    message = str(info.value)
    assert "selected mig-config not present: all-3g.99gb" in message
    assert str(MIG_PARTED_STYLE) in message
    assert "all-disabled, all-enabled, all-1g.5gb" in message


def test_select_config_needs_a_name_when_the_file_holds_several(layout: LayoutFile) -> None:
    expected = "no config selected, and the file holds more than one; choose one of 9 configs: all-disabled"
    with pytest.raises(InvalidLayoutError, match=expected):
        select_config(layout, None)


def test_a_missing_config_name_shows_the_closest_names_and_a_few_others_not_the_whole_file() -> None:
    names = [f"all-{g}g.{g * 10}gb" for g in range(1, 8)] + [f"team-{i}" for i in range(70)] + ["all-balanced"]
    configs = "".join(f"  {n}:\n    - {{devices: all, mig-enabled: false}}\n" for n in names)
    text = "version: v1\nmig-configs:\n" + configs
    layout = parse_layout(text, source="many.yaml")
    with pytest.raises(InvalidLayoutError) as info:
        select_config(layout, "all-balancd")
    message = str(info.value)
    assert "did you mean all-balanced?" in message
    shown = "all-1g.10gb, all-2g.20gb, all-3g.30gb, all-4g.40gb, all-5g.50gb, all-6g.60gb"
    assert f"78 configs: {shown} and 72 more" in message
    assert "team-69" not in message
    assert len(message) < 300
    with pytest.raises(InvalidLayoutError) as info:
        select_config(layout, "xyzzy")
    assert "did you mean" not in str(info.value)


def test_select_config_without_a_name_takes_the_only_config() -> None:
    text = "version: v1\nmig-configs:\n  only:\n    - {devices: all, mig-enabled: false}\n"
    layout = parse_layout(text, source="one.yaml")
    assert select_config(layout, None) == layout.configs["only"]
