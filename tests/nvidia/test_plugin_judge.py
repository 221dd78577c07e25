"""NVIDIA's device plugin (v0.18.2) judges the agent's expected advertisement and the simulated plugin.

For each case the GPUs are put in the layout, NVIDIA's plugin runs in the plugin pod (reading the
case's sharing config, `--config-file`) and registers with the simulated kubelet over the real device
plugin API. What it registered is the answer: the simulated plugin must register the same device ids
under the same names, and the agent's expectation (migagent.attempt.advertise.expectation.expectation, from
the observed GPUs, the strategy and the sharing config) must equal its counts; where the plugin
refuses the node (it exits, nothing advertised), the agent must refuse the layout or the config.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from migagent.attempt.advertise.expectation import Expectation, expectation
from migagent.attempt.advertise.expected import NotAdvertisableError
from migagent.attempt.advertise.sharing_source import SharingView
from migagent.attempt.preflight import advertised_strategy
from migagent.layout.sharing import NO_SHARING, SharingConfig, SharingConfigError, parse_plugin_config
from migagent_sim.kubelet_devices import mps_refusal, read_inventory
from migagent_sim.nvidia_plugin import NvidiaTools
from tests.nvidia.cases import LAYOUTS, SHARING_CASES, STRATEGY_CASES, Case
from tests.nvidia.plugin_node import PluginNode, PluginSetup

Registration = dict[str, tuple[str, ...]]


def _sharing(case: Case) -> SharingConfig | SharingConfigError:
    if case.config is None:
        return NO_SHARING
    try:
        return parse_plugin_config(case.config, where=f"case {case}")
    except SharingConfigError as refused:
        return refused


def agent_expects(node: PluginNode, case: Case) -> Expectation | str:
    """What the agent waits for, or why it refuses (the layout or the config)."""
    sharing = _sharing(case)
    if isinstance(sharing, SharingConfigError):
        return f"config refused: {sharing}"
    view = SharingView(source=f"case {case}", config=sharing)
    try:
        return expectation(node.observe(), strategy=case.strategy, sharing=view)
    except NotAdvertisableError as refused:
        return f"layout refused: {refused}"


def simulated_registration(node: PluginNode, case: Case) -> Registration:
    """What the simulated plugin registers for the same node and config ({} when it exits)."""
    sharing = _sharing(case)
    inventory = read_inventory(node.fake, case.strategy)
    if isinstance(sharing, SharingConfigError) or mps_refusal(sharing, case.strategy, inventory):
        return {}
    return {name: tuple(sorted(ids)) for name, ids in inventory.resources(sharing).items()}



@pytest.mark.parametrize("case", STRATEGY_CASES + SHARING_CASES, ids=str)
def test_the_real_plugin_registers_what_the_simulated_one_does_and_the_agent_expects(
    case: Case, tmp_path: Path, nvidia_tools: NvidiaTools, fake_library: Path
) -> None:
    setup = PluginSetup(case.spec, case.strategy, config=case.config)
    with PluginNode(tmp_path, nvidia_tools, fake_library, setup) as node:
        node.lay_out(LAYOUTS, case.layout)
        node.run_plugin()

        real = node.registered()
        expected = agent_expects(node, case)

        seen = f"the plugin registered {real}; its log ends:\n{node.plugin_log()[-1500:]}"
        assert real == simulated_registration(node, case), seen
        if isinstance(expected, str):
            assert real == {}, f"the agent refuses ({expected}) but {seen}"
            assert node.plugin_error is not None, seen
            return
        counts = {name: len(ids) for name, ids in real.items()}
        assert expected.exact, expected.note
        assert expected.matches(counts) == (True, {}), f"the agent expects {expected.describe()}; {seen}"
        assert {name: counts.get(name, 0) for name in expected.counts()} == expected.counts(), seen
        unpredicted = set(counts) - set(expected.counts())
        assert unpredicted <= {"nvidia.com/gpu"}, f"only whole GPUs go unpredicted under mixed; {seen}"
        sharing = _sharing(case)
        gpu = sharing.advertised("nvidia.com/gpu") if isinstance(sharing, SharingConfig) else None
        assert advertised_strategy(counts, node.observe, gpu=gpu) in (None, case.strategy)
