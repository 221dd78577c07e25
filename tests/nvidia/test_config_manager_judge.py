"""NVIDIA's config-manager (v0.18.2) and plugin judge how the agent reads the plugin's sharing config
through `nvidia.com/device-plugin.config`, and how the simulated plugin follows that label.

The plugin pod runs config-manager as init container and sidecar (the plugin chart's fallbacks:
a config named `default`, else the only one). After each label change, what the real plugin
registers must be what the agent expects from the ConfigMap and the label (or the agent must say
it does not know); the simulated plugin must register the same.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

from migagent.attempt.advertise.expectation import expectation
from migagent.attempt.advertise.sharing_source import SharingSettings, SharingSource
from migagent.layout.strategy import MigStrategy
from migagent.node.names import DEVICE_PLUGIN_CONFIG_LABEL
from migagent.node.port import NodeView
from migagent_sim.apiserver import FakeApiServer
from migagent_sim.kubelet import FakeKubelet
from migagent_sim.nvidia_plugin import NvidiaTools
from tests.nvidia.cases import H100, LAYOUTS, ONE_G, time_slicing
from tests.nvidia.plugin_node import CONFIG_MAP, NODE, PLUGIN_DEPLOY, PluginNode, PluginSetup

TWICE = time_slicing(f"{{name: {ONE_G}, replicas: 2}}")
FOUR_RENAMED = time_slicing(f"{{name: {ONE_G}, replicas: 4}}", rename_by_default=True)


class _ConfigMaps:
    """The agent's ConfigMapReader over the fake API server's store."""

    def __init__(self, api: FakeApiServer) -> None:
        self._api = api

    def read_config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        found = self._api.config_map(namespace, name)
        return None if found is None else dict(found.get("data") or {})


def agent_expects(node: PluginNode) -> dict[str, int] | None:
    """The counts the agent would wait for now; None when it says it does not know the sharing."""
    labels = node.api.node(NODE)["metadata"].get("labels", {})
    source = SharingSource(SharingSettings(config_map="/".join(CONFIG_MAP)), reader=_ConfigMaps(node.api))
    view = source.view(NodeView(name=NODE, uid="", resource_version="", labels=labels))
    expected = expectation(node.observe(), strategy=MigStrategy.MIXED, sharing=view)
    return expected.counts() if expected.exact else None


def counts(node: PluginNode) -> dict[str, int]:
    return {name: len(ids) for name, ids in node.registered().items()}


def simulated(node: PluginNode, *, label: str | None) -> dict[str, int]:
    """What the simulated plugin registers with the same ConfigMap, label and GPUs."""
    with FakeApiServer() as api:
        api.put_config_map(*CONFIG_MAP, node.setup.configs or {})
        api.add_node(NODE, labels={PLUGIN_DEPLOY: "true", **({DEVICE_PLUGIN_CONFIG_LABEL: label} if label else {})})
        with tempfile.TemporaryDirectory(prefix="sim-") as scratch, FakeKubelet(
            api,
            node.fake,
            node_name=NODE,
            socket_path=f"{scratch}/pr.sock",
            plugin_config_map=CONFIG_MAP,
        ) as kubelet:
            return {name: count for name, count in kubelet.plugin_resources().items() if count}


def test_config_manager_label_switches_are_what_the_agent_reads(
    tmp_path: Path, nvidia_tools: NvidiaTools, fake_library: Path
) -> None:
    setup = PluginSetup(H100, MigStrategy.MIXED, configs={"default": TWICE, "four": FOUR_RENAMED})
    with PluginNode(tmp_path, nvidia_tools, fake_library, setup) as node:
        node.lay_out(LAYOUTS, "balanced")
        node.run_plugin()  # no label: the config named "default"
        assert counts(node) == agent_expects(node) == simulated(node, label=None) == {
            "nvidia.com/mig-1g.10gb": 8, "nvidia.com/mig-2g.20gb": 2, "nvidia.com/mig-3g.40gb": 2,
        }

        assert node.select_config("four") == "signalled"
        assert counts(node) == agent_expects(node) == simulated(node, label="four")
        assert counts(node)["nvidia.com/mig-1g.10gb.shared"] == 16

        before = counts(node)
        assert node.select_config("nine") == "refused"  # the sidecar exits; the plugin keeps its config
        assert counts(node) == before
        assert agent_expects(node) is None, "a label naming a config the ConfigMap lacks: unknown"

        assert node.select_config(None) == "signalled"  # the restarted sidecar falls back to "default"
        assert counts(node) == agent_expects(node) == simulated(node, label=None)
        assert counts(node)["nvidia.com/mig-1g.10gb"] == 8


def test_a_pod_started_with_a_label_naming_no_config_runs_the_fallback_as_config_manager_init_reads_no_label(
    tmp_path: Path, nvidia_tools: NvidiaTools, fake_library: Path
) -> None:
    """config-manager-init (v0.18.2) takes the label before its informer synced, so it falls back to the
    config named `default`; the sidecar then finds `nine` missing and exits, and the plugin keeps it."""
    setup = PluginSetup(H100, MigStrategy.MIXED, configs={"default": TWICE, "four": FOUR_RENAMED})
    with PluginNode(tmp_path, nvidia_tools, fake_library, setup) as node:
        node.lay_out(LAYOUTS, "balanced")
        node.run_plugin(config_label="nine")

        assert counts(node)["nvidia.com/mig-1g.10gb"] == 8
        assert counts(node) == simulated(node, label="nine")
        assert agent_expects(node) is None
