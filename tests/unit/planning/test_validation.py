"""Offline validation says, per config, where it was checked, what was skipped and why (issue 11).

Skipped is never counted as valid: a config is valid only when each entry was checked on some model.
"""

from __future__ import annotations

from migagent.catalog import all_models, model_by_key
from migagent.layout.parse import parse_layout
from migagent.planning.validation import ConfigReport, ConfigStatus, validate_layout

LAYOUT = parse_layout(
    "version: v1\nmig-configs:\n"
    '  a100-only:\n    - {device-filter: "0x20B010DE", devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 7}}\n'
    '  other-only:\n    - {device-filter: "0x2C3110DE", devices: all, mig-enabled: true, mig-devices: {"1g.23gb": 7}}\n'
    "  a100-and-other:\n"
    '    - {device-filter: "0x20B010DE", devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 7}}\n'
    '    - {device-filter: "0x2C3110DE", devices: all, mig-enabled: true, mig-devices: {"1g.23gb": 7}}\n'
    '  unfiltered-1g.6gb:\n    - {devices: all, mig-enabled: true, mig-devices: {"1g.6gb": 4}}\n',
    source="l.yaml",
)


def report(name: str, *models: str) -> ConfigReport:
    chosen = [model_by_key(key) for key in models] or None
    (only,) = validate_layout(LAYOUT, config=name, models=chosen)
    return only


def test_a_filter_for_a_model_that_was_not_selected_says_which_model_it_matches() -> None:
    result = report("a100-only", "H100-80GB-SXM", "A30-24GB")
    assert result.status is ConfigStatus.NOT_CHECKED
    assert result.unchecked_entries == [
        "[0] device-filter 0x20B010DE matches A100-40GB, not among the models checked (H100-80GB-SXM, A30-24GB)"
    ]
    assert result.skipped() == {
        "H100-80GB-SXM": "not matched by any entry's device-filter",
        "A30-24GB": "not matched by any entry's device-filter",
    }


def test_a_filter_for_hardware_outside_the_catalog_says_it_matches_no_catalog_model() -> None:
    result = report("other-only")
    assert result.status is ConfigStatus.NOT_CHECKED
    assert result.unchecked_entries == ["[0] device-filter 0x2C3110DE matches no catalog model"]
    assert not result.checked


def test_a_config_with_an_entry_checked_nowhere_is_only_partly_checked_not_valid() -> None:
    result = report("a100-and-other")
    assert result.status is ConfigStatus.PARTLY_CHECKED
    assert result.checked == {"A100-40GB": [0]}
    assert result.unchecked_entries == ["[1] device-filter 0x2C3110DE matches no catalog model"]


def test_an_unfiltered_entry_names_the_models_it_skipped_and_the_profile_they_lack() -> None:
    result = report("unfiltered-1g.6gb")
    assert result.status is ConfigStatus.VALID
    assert list(result.checked) == ["A30-24GB"]
    skipped = result.skipped()
    assert skipped["A100-40GB"] == "lacks 1g.6gb"
    assert set(skipped) == {m.key for m in all_models()} - {"A30-24GB"}


def test_a_fully_checked_filtered_config_is_valid_and_lists_other_models_as_not_matched() -> None:
    result = report("a100-only")
    assert result.status is ConfigStatus.VALID
    assert result.checked == {"A100-40GB": [0]}
    assert result.skipped()["H100-80GB-SXM"] == "not matched by any entry's device-filter"
