from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from migagent_sim.apiserver.access import AccessControl
from migagent_sim.cluster import SimCluster, SimClusterConfig
from tests.integration.agent.support import SMALL
from tests.integration.deploy.manifests import only, render, render_with_components


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., SimCluster]]:
    """Start simulated clusters (each in its own directory); all are stopped after the test.

    The fake API server enforces the RBAC and admission policy rendered from deploy/ (the standalone
    overlay with the delete-pod-restart component for a daemonset plugin, else gpu-operator), so a call
    the manifests deny fails the test."""
    started: list[SimCluster] = []

    def make(config: SimClusterConfig = SMALL, *extra_components: str) -> SimCluster:
        # a plugin restarted by deleting its pod: the standalone overlay with the component granting it
        overlay = "overlays/standalone" if config.plugin_mode == "daemonset" else "overlays/gpu-operator"
        components: tuple[str, ...] = ("components/delete-pod-restart",) if config.plugin_mode == "daemonset" else ()
        if config.plugin_configs is not None and config.agent_reads_plugin_config:
            components += ("components/device-plugin-config",)  # get on the plugin's ConfigMap
        components += extra_components
        objects = render_with_components(overlay, *components) if components else render(overlay)
        account = only(objects, "ServiceAccount")["metadata"]
        cluster = SimCluster(
            tmp_path / f"cluster-{len(started)}",
            config,
            access=AccessControl(objects),
            agent_account=(account["namespace"], account["name"]),
        ).start()
        started.append(cluster)
        return cluster

    yield make
    for cluster in started:
        cluster.stop()


@pytest.fixture
def cluster(make_cluster: Callable[[SimClusterConfig], SimCluster]) -> SimCluster:
    return make_cluster(SMALL)
