from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from migagent_sim.apiserver.access import AccessControl
from migagent_sim.cluster import SimCluster, SimClusterConfig
from tests.integration.agent.support import SMALL
from tests.integration.deploy.manifests import only, render, render_with_components


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[[SimClusterConfig], SimCluster]]:
    """Start simulated clusters (each in its own directory); all are stopped after the test.

    The fake API server enforces the RBAC and admission policy rendered from deploy/ (the standalone
    overlay with the delete-pod-restart component for a daemonset plugin, else gpu-operator), so a call
    the manifests deny fails the test."""
    started: list[SimCluster] = []

    def make(config: SimClusterConfig = SMALL) -> SimCluster:
        objects = (
            # a plugin restarted by deleting its pod: the standalone overlay with the component granting it
            render_with_components("overlays/standalone", "components/delete-pod-restart")
            if config.plugin_mode == "daemonset"
            else render("overlays/gpu-operator")
        )
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
