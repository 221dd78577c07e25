from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from migagent.cli.simcluster import SimCluster, SimClusterConfig
from tests.integration.agent.support import SMALL


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[[SimClusterConfig], SimCluster]]:
    """Start simulated clusters (each in its own directory); all are stopped after the test."""
    started: list[SimCluster] = []

    def make(config: SimClusterConfig = SMALL) -> SimCluster:
        cluster = SimCluster(tmp_path / f"cluster-{len(started)}", config).start()
        started.append(cluster)
        return cluster

    yield make
    for cluster in started:
        cluster.stop()


@pytest.fixture
def cluster(make_cluster: Callable[[SimClusterConfig], SimCluster]) -> SimCluster:
    return make_cluster(SMALL)
