"""NVIDIA's GPU Feature Discovery (v0.18.2) judges what the agent reads from GFD labels, and the simulated
GFD: for the same node and config, `gpu-feature-discovery --oneshot` writes the labels and
- `--mig-strategy auto` reads the strategy GFD ran with from them (preflight.gfd_strategy);
- the sharing detection (sharing_source.gfd_view) says of each resource the node advertises either
  what the plugin's config says (migagent.layout.sharing, itself judged by the real plugin) or that
  it does not know, never something else;
- the simulated GFD (migagent_sim.gfd_labels) writes the same values under the same keys.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from migagent.attempt.advertise.expected import NotAdvertisableError, expected_resources
from migagent.attempt.advertise.sharing_source import gfd_view
from migagent.attempt.preflight import gfd_strategy
from migagent.layout.sharing import NO_SHARING, SharingConfigError, parse_plugin_config
from migagent_sim.gfd_labels import gfd_labels
from migagent_sim.nvidia_gfd import discover_labels
from migagent_sim.nvidia_plugin import NvidiaTools, gpu_node_command
from tests.nvidia.cases import LAYOUTS, SHARING_CASES, STRATEGY_CASES, Case
from tests.nvidia.plugin_node import PluginNode, PluginSetup

_SUFFIXES = (".count", ".replicas", ".sharing-strategy", ".product")


def _real_labels(node: PluginNode, case: Case, tools: NvidiaTools, library: Path) -> dict[str, str]:
    return discover_labels(
        tools.gpu_feature_discovery,
        gpu_node_command(node.state_file, library),
        strategy=case.strategy,
        workdir=node.workdir,
        config=case.config,
    )


@pytest.mark.parametrize("case", [c for c in STRATEGY_CASES + SHARING_CASES if c.name != "ts-one-replica"], ids=str)
def test_gfd_labels_say_what_the_agent_reads_and_what_the_simulated_gfd_writes(
    case: Case, tmp_path: Path, nvidia_tools: NvidiaTools, fake_library: Path
) -> None:
    with PluginNode(tmp_path, nvidia_tools, fake_library, PluginSetup(case.spec, case.strategy)) as node:
        node.lay_out(LAYOUTS, case.layout)
        real = _real_labels(node, case, nvidia_tools, fake_library)

        sharing = parse_plugin_config(case.config, where=str(case)) if case.config else NO_SHARING
        ours = gfd_labels(node.fake, case.strategy, sharing)
        modelled = {k: v for k, v in real.items() if k.endswith(_SUFFIXES) or k == "nvidia.com/mig.strategy"}
        assert ours == modelled

        assert gfd_strategy(real) is case.strategy
        try:
            resources = expected_resources(node.observe(), strategy=case.strategy, include_full_gpus=True)
        except NotAdvertisableError:
            return
        view = gfd_view(real)
        for resource in resources:
            read = view.advertised(resource)
            assert read is None or read == sharing.advertised(resource), f"{resource}: GFD read as {read}"


def test_gfd_refuses_a_config_the_plugin_refuses(tmp_path: Path, nvidia_tools: NvidiaTools, fake_library: Path) -> None:
    (case,) = [c for c in SHARING_CASES if c.name == "ts-one-replica"]
    with pytest.raises(SharingConfigError, match="replicas"):
        parse_plugin_config(case.config or "", where=str(case))
    with PluginNode(tmp_path, nvidia_tools, fake_library, PluginSetup(case.spec, case.strategy)) as node:
        node.lay_out(LAYOUTS, case.layout)
        with pytest.raises(RuntimeError, match="replicas must be >= 2"):
            _real_labels(node, case, nvidia_tools, fake_library)
