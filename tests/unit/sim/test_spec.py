from __future__ import annotations

import pytest

from migagent.catalog import model_by_key
from migagent.sim import NodeSpecError, parse_node_spec


def test_a_count_prefix_repeats_the_model() -> None:
    models = parse_node_spec("8xH100-80GB-SXM")
    assert len(models) == 8
    assert {m.key for m in models} == {"H100-80GB-SXM"}


def test_entries_are_comma_separated_and_keep_their_order() -> None:
    keys = [m.key for m in parse_node_spec("2xA100-40GB, 2xA30-24GB")]
    assert keys == ["A100-40GB", "A100-40GB", "A30-24GB", "A30-24GB"]


def test_the_count_defaults_to_one_and_keys_are_case_insensitive() -> None:
    assert parse_node_spec("h200-141gb") == (model_by_key("H200-141GB"),)


def test_an_unknown_model_names_every_valid_key() -> None:
    with pytest.raises(NodeSpecError, match="unknown GPU model 'V100'") as info:
        parse_node_spec("2xV100")
    assert "A100-40GB" in str(info.value)
    assert "B200-180GB" in str(info.value)


@pytest.mark.parametrize("spec", ["", "A100-40GB,", " , A30-24GB"])
def test_an_empty_entry_is_rejected(spec: str) -> None:
    with pytest.raises(NodeSpecError, match="empty entry"):
        parse_node_spec(spec)


def test_a_zero_count_is_rejected() -> None:
    with pytest.raises(NodeSpecError, match="at least 1"):
        parse_node_spec("0xA30-24GB")


def test_a_node_larger_than_the_simulated_bus_allows_is_rejected() -> None:
    with pytest.raises(NodeSpecError, match="at most 64"):
        parse_node_spec("65xA30-24GB")


def test_a_huge_count_is_rejected_before_any_gpu_list_is_built() -> None:
    with pytest.raises(NodeSpecError, match=f"asks for {10**12 + 1} GPUs; the simulator supports at most 64"):
        parse_node_spec(f"{10**12}xA30-24GB,A100-40GB")
