"""The agent against the simulated cluster with NVIDIA's device plugin in the plugin pod (fake API server).

Each change the agent makes pauses the plugin (the GPU Operator's deploy label), reconfigures the GPUs,
resumes it; the real plugin then re-enumerates NVML and registers with the simulated kubelet. The
agent's success is judged by it: `success` is reported only once the Node shows what the agent
expects, and what the agent expects must be what the real plugin registered (each device counted,
replicas included). Time-slicing runs through the GPU Operator's config-manager: the agent reads the
plugin's ConfigMap, config-manager follows `nvidia.com/device-plugin.config` and restarts the plugin.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from migagent.attempt.advertise.expectation import expectation
from migagent.attempt.advertise.sharing_source import SharingSource
from migagent.layout.strategy import MigStrategy
from migagent.node.names import DESIRED_ANNOTATION, MIG_CONFIG_STATE_LABEL
from migagent.nvml.driver import GpuDriver
from migagent.sim.reset import SimResetRunner
from migagent_sim.cluster import SimCluster, SimClusterConfig
from migagent_sim.deadline import Deadline
from migagent_sim.deviceplugin import AllocationError
from migagent_sim.fakelib.backend import nvml_for
from migagent_sim.nvidia_plugin import NvidiaTools
from tests.nvidia.cases import time_slicing
from tests.waiting import eventually

CONFIG_MAP = ("gpu-operator", "device-plugin-configs")
MakeCluster = Callable[..., SimCluster]
_CHANGE_TIMEOUT_S = 180.0


@pytest.fixture
def make_cluster(tmp_path: Path, nvidia_tools: NvidiaTools, fake_library: Path) -> Iterator[MakeCluster]:
    started: list[SimCluster] = []

    def make(**settings: object) -> SimCluster:
        config = replace(
            SimClusterConfig(spec="2xH100-80GB-SXM", start_layout="all-1g.10gb", nvidia_tools=nvidia_tools),
            **settings,  # type: ignore[arg-type]
        )
        cluster = SimCluster(tmp_path / f"cluster-{len(started)}", config).start()
        started.append(cluster)
        return cluster

    yield make
    for cluster in started:
        cluster.stop()


def change_to(cluster: SimCluster, layout: str) -> None:
    """Label the node and let the agent apply the layout; fail with its condition if it does not succeed."""
    options = cluster.options(readvertise_timeout_s=120.0, plugin_settle_s=60.0, advertisement_stable_s=3.0)
    agent = cluster.start_agent(options)
    cluster.label(layout)
    outcome = _wait_for_layout(cluster, layout)
    agent.stop()
    assert outcome == "success", f"{cluster.node()['status'].get('conditions')}"


def _wait_for_layout(cluster: SimCluster, layout: str) -> str | None:
    """The state once the agent has taken `layout` up (its desired annotation) and finished with it."""
    deadline = Deadline(_CHANGE_TIMEOUT_S)
    while not deadline.passed():
        metadata = cluster.node()["metadata"]
        current = metadata.get("labels", {}).get(MIG_CONFIG_STATE_LABEL)
        if layout in metadata.get("annotations", {}).get(DESIRED_ANNOTATION, "") and current in ("success", "failed"):
            return str(current)
        time.sleep(0.2)
    return None


def registered(cluster: SimCluster) -> dict[str, int]:
    """What the real plugin registers now, counted per resource."""
    return {name: len(ids) for name, ids in cluster.kubelet.device_manager.healthy_devices().items()}


def agent_expects(cluster: SimCluster, strategy: MigStrategy) -> dict[str, int]:
    """The agent's expectation for the node as it is, read as the agent reads it."""
    with GpuDriver(nvml_for(cluster.fake), reset_runner=SimResetRunner(cluster.fake)) as driver:
        observation = driver.observe()
    api = cluster.agent_api()
    sharing = SharingSource(cluster.options().settings.sharing, reader=api).view(api.get_node())
    expected = expectation(observation, strategy=strategy, sharing=sharing)
    assert expected.exact, expected.note
    return expected.counts()


@pytest.mark.parametrize(("strategy", "start", "target"), [
    (MigStrategy.MIXED, "all-1g.10gb", "all-balanced"),
    (MigStrategy.SINGLE, "all-3g.40gb", "all-7g"),
    (MigStrategy.NONE, "all-1g.10gb", "all-balanced"),
], ids=["mixed", "single", "none"])
def test_the_agent_succeeds_only_once_the_real_plugin_advertises_what_it_expects(
    strategy: MigStrategy, start: str, target: str, make_cluster: MakeCluster
) -> None:
    cluster = make_cluster(mig_strategy=strategy, start_layout=start)

    change_to(cluster, target)

    real = registered(cluster)
    assert real == agent_expects(cluster, strategy) | _whole_gpus(real, strategy)
    assert {n: c for n, c in cluster.kubelet.plugin_resources().items() if c} == real


def _whole_gpus(real: dict[str, int], strategy: MigStrategy) -> dict[str, int]:
    """Under mixed the agent does not predict nvidia.com/gpu (GPUs with MIG off); none is left here."""
    if strategy is MigStrategy.MIXED and "nvidia.com/gpu" in real:
        return {"nvidia.com/gpu": real["nvidia.com/gpu"]}
    return {}


def test_time_slicing_through_config_manager_the_agent_expects_the_replicas_the_plugin_registers(
    make_cluster: MakeCluster,
) -> None:
    two = time_slicing("{name: nvidia.com/mig-1g.10gb, replicas: 2}", "{name: nvidia.com/mig-2g.20gb, replicas: 2}",
                       rename_by_default=True, fail_greater_than_one=True)
    four = time_slicing("{name: nvidia.com/mig-1g.10gb, replicas: 4}")
    cluster = make_cluster(
        plugin_configs={"two": two, "four": four}, plugin_config_map=CONFIG_MAP, plugin_default_config="two"
    )

    change_to(cluster, "all-balanced")
    real = registered(cluster)
    assert real == agent_expects(cluster, MigStrategy.MIXED)
    assert real == {"nvidia.com/mig-1g.10gb.shared": 8, "nvidia.com/mig-2g.20gb.shared": 4, "nvidia.com/mig-3g.40gb": 2}

    with pytest.raises(AllocationError, match="maximum request size for shared resources is 1; found 2"):
        cluster.kubelet.device_manager.allocate("pod-a", "main", "nvidia.com/mig-1g.10gb.shared", 2)
    allocated = cluster.kubelet.device_manager.allocate("pod-a", "main", "nvidia.com/mig-1g.10gb.shared", 1)
    assert allocated.envs["NVIDIA_VISIBLE_DEVICES"] == allocated.device_ids[0].split("::")[0]

    cluster.select_plugin_config("four")  # config-manager switches the file and SIGHUPs the plugin
    # Once the plugin serves "four" (4 replicas of each of the 4 1g.10gb GIs, not renamed): a restart
    # that config-manager's switch makes after the agent's change would withdraw what the agent saw.
    eventually(lambda: registered(cluster) == {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 2,
                                           "nvidia.com/mig-3g.40gb": 2}, "the plugin serves config four",
               timeout_s=_CHANGE_TIMEOUT_S)
    change_to(cluster, "all-1g.10gb")
    # The plugin pod the agent resumed starts config-manager again, whose first sync may restart the
    # plugin once more, seconds after the agent's success on a loaded machine: judged when it is back.
    expected = agent_expects(cluster, MigStrategy.MIXED)
    eventually(lambda: registered(cluster) == expected, f"the plugin registers {expected}", timeout_s=_CHANGE_TIMEOUT_S)
    real = registered(cluster)
    assert real["nvidia.com/mig-1g.10gb"] == 14 * 4
