"""A config that selects none of the node's GPUs is an error, not a silent success (issue 11).

mig-parted applies such a config as "nothing to do" and reports success, so a typo'd node label,
device filter or index reads as applied. `resolve_config` is what apply, assert, plan on a node,
host mode and the agent all go through, so refusing here refuses it everywhere.
"""

from __future__ import annotations

import pytest

from migagent.errors import InvalidLayoutError, LayoutSelectsNoGpuError
from migagent.layout.parse import parse_layout
from migagent.layout.resolve import resolve_config
from migagent.layout.spec import LayoutFile
from tests.unit.layout.support import gpu

LAYOUT = parse_layout(
    "version: v1\nmig-configs:\n"
    "  h100-only:\n"
    '    - {device-filter: "0x233010DE", devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 7}}\n'
    "  gpu-9:\n    - {devices: [9], mig-enabled: false}\n"
    "  gpu-1-of-two:\n    - {devices: [9], mig-enabled: false}\n    - {devices: [1], mig-enabled: false}\n"
    "  gpu-1:\n    - {devices: [1], mig-enabled: false}\n",
    source="layouts.yaml",
)
TWO_A100 = [gpu(0, "A100-40GB"), gpu(1, "A100-40GB")]


def refusal(layout: LayoutFile, name: str) -> str:
    with pytest.raises(LayoutSelectsNoGpuError) as info:
        resolve_config(layout, name, TWO_A100)
    return str(info.value)


def test_a_filter_for_another_model_selects_no_gpu_and_is_refused_naming_config_and_gpus() -> None:
    assert refusal(LAYOUT, "h100-only") == (
        "layouts.yaml: config 'h100-only' selects none of this node's GPUs; its entries select "
        "[0] devices: all with device-filter 0x233010DE; the node has GPU 0 (A100-40GB) 0x20B010DE, "
        "GPU 1 (A100-40GB) 0x20B010DE. Check the config's devices and device-filter, or the name it was "
        "selected by"
    )


def test_an_index_past_the_nodes_gpus_selects_no_gpu() -> None:
    message = refusal(LAYOUT, "gpu-9")
    assert "config 'gpu-9' selects none of this node's GPUs; its entries select [0] devices: [9];" in message


def test_a_config_that_selects_some_of_the_nodes_gpus_is_not_refused() -> None:
    desired = resolve_config(LAYOUT, "gpu-1", TWO_A100)
    assert [g.index for g in desired.gpus] == [1]


def test_an_index_the_node_lacks_is_refused_even_when_another_entry_selects_a_gpu() -> None:
    # mig-parted skips GPU 9 without a word (issue 28): the GPU meant is left as it was.
    assert refusal(LAYOUT, "gpu-1-of-two") == (
        "layouts.yaml: mig-configs.gpu-1-of-two[0] lists GPU 9, which this node does not have (it has GPUs 0-1)"
    )


def test_a_node_without_gpus_is_named_as_such() -> None:
    with pytest.raises(LayoutSelectsNoGpuError, match="the node has no GPUs"):
        resolve_config(LAYOUT, "gpu-9", [])


def test_the_refusal_is_an_invalid_layout_so_every_command_exits_1_with_one_message() -> None:
    assert issubclass(LayoutSelectsNoGpuError, InvalidLayoutError)
