"""device-filter strings: read like Go's ParseUint(s, 0, 32), matched on device+vendor[+subsystem]."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migagent.layout.spec import PciFilter, PciFilterError, format_pci_id, parse_go_uint32, parse_pci_filter

UINT32 = st.integers(min_value=0, max_value=0xFFFF_FFFF)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0x20B010DE", 0x20B010DE),
        ("0x20b010de", 0x20B010DE),
        ("0X20B010DE", 0x20B010DE),
        ("548409566", 0x20B010DE),
        ("0x20B0_10DE", 0x20B010DE),
        ("017", 0o17),
        ("0o17", 0o17),
        ("0b101", 5),
        ("0", 0),
        ("4294967295", 0xFFFF_FFFF),
    ],
)
def test_numbers_parse_as_go_parseuint_with_base_zero(text: str, value: int) -> None:
    assert parse_go_uint32(text) == value


@pytest.mark.parametrize("text", ["", "+1", "-1", " 1", "1 ", "0x", "08", "0xZZ", "1_", "4294967296", "0x1_0000_0000"])
def test_text_go_would_refuse_is_refused(text: str) -> None:
    with pytest.raises(PciFilterError):
        parse_go_uint32(text)


def test_a_filter_without_qualifier_ignores_the_subsystem() -> None:
    f = parse_pci_filter("0x20B010DE")
    assert f == PciFilter(0x20B010DE, None)
    assert f.matches(0x20B010DE, None)
    assert f.matches(0x20B010DE, 0x134F10DE)
    assert not f.matches(0x20B110DE, None)


def test_a_subsystem_qualifier_must_match_as_well() -> None:
    f = parse_pci_filter("0x20B010DE:0x134F10DE")
    assert f == PciFilter(0x20B010DE, 0x134F10DE)
    assert f.matches(0x20B010DE, 0x134F10DE)
    assert not f.matches(0x20B010DE, 0x147F10DE)
    assert not f.matches(0x20B010DE, None)
    assert not f.matches(0x20B110DE, 0x134F10DE)


def test_offline_a_subsystem_qualified_filter_still_targets_its_device_id() -> None:
    qualified = parse_pci_filter("0x20B010DE:0x134F10DE")
    assert qualified.may_match(0x20B010DE)
    assert not qualified.may_match(0x20B110DE)
    assert parse_pci_filter("0x20B010DE").may_match(0x20B010DE)


def test_more_than_one_colon_is_refused() -> None:
    with pytest.raises(PciFilterError, match="more than one ':'"):
        parse_pci_filter("0x20B010DE:0x1:0x2")


def test_filters_are_written_as_mig_parted_writes_them() -> None:
    assert format_pci_id(0x233010DE) == "0x233010DE"
    assert str(PciFilter(0x20B710DE)) == "0x20B710DE"
    assert str(PciFilter(0x20B010DE, 0x134F10DE)) == "0x20B010DE:0x134F10DE"


@given(UINT32, st.none() | UINT32)
def test_a_written_filter_reads_back_the_same(device_vendor: int, subsystem: int | None) -> None:
    f = PciFilter(device_vendor, subsystem)
    assert parse_pci_filter(str(f)) == f


@given(UINT32)
def test_decimal_and_hex_spellings_are_the_same_filter(value: int) -> None:
    assert parse_pci_filter(str(value)) == parse_pci_filter(hex(value))
