"""On the real control plane, with NVIDIA's device plugin in the plugin pod: the agent's change succeeds
only once the Node shows what it expects, and that is what the real plugin registered.

The kubelet and plugin pod are the simulator's (tests/realkube/world.py), clients of the real
kube-apiserver; the plugin is NVIDIA's v0.18.2 binary (scripts/nvidia_tools.sh), run on the
simulated node, registering over the kubelet's device plugin API.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from migagent.layout.strategy import MigStrategy
from migagent_sim.cluster import SimCluster, SimClusterConfig
from migagent_sim.gpu_node.nvidia_tools import tools_dir
from migagent_sim.nvidia_plugin import NvidiaTools
from tests.integration.agent.support import SMALL, SMALL_BALANCED
from tests.nvidia.gate import needs_nvidia_tools
from tests.nvidia.test_agent_real_plugin import agent_expects, change_to, registered
from tests.realkube.test_scenarios import make_cluster  # noqa: F401 (the fixture)

pytestmark = needs_nvidia_tools()


def test_the_agent_on_the_real_control_plane_succeeds_when_the_real_plugin_advertises_what_it_expects(
    make_cluster: Callable[[SimClusterConfig], SimCluster],  # noqa: F811 (the fixture imported above)
) -> None:
    cluster = make_cluster(replace(SMALL, nvidia_tools=NvidiaTools(tools_dir())))

    change_to(cluster, "all-balanced")

    assert registered(cluster) == agent_expects(cluster, MigStrategy.MIXED)
    assert registered(cluster) == SMALL_BALANCED
