from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from migagent.sim import FakeNvml
from migagent_sim.apiserver import FakeApiServer
from migagent_sim.kubelet import FakeKubelet
from tests.integration.kubelet.support import NODE

DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"


@pytest.fixture
def fake() -> FakeNvml:
    """Two H100-80GB GPUs with MIG enabled and no instances yet."""
    return FakeNvml.from_spec("2xH100-80GB-SXM", mig_enabled=True)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(grace_scale=0.01) as server:
        yield server


@pytest.fixture
def core_v1(api: FakeApiServer) -> Iterator[k8s.CoreV1Api]:
    """The real kubernetes client, pointed at the fake apiserver."""
    configuration = k8s.Configuration(host=api.url)
    with k8s.ApiClient(configuration) as api_client:
        yield k8s.CoreV1Api(api_client)


@pytest.fixture
def make_kubelet(api: FakeApiServer, fake: FakeNvml, socket_path: str) -> Iterator[Callable[..., FakeKubelet]]:
    """Start a FakeKubelet on NODE (created with the device-plugin deploy label "true" unless given)."""
    started: list[FakeKubelet] = []

    def make(*, labels: dict[str, str] | None = None, **options: Any) -> FakeKubelet:
        api.add_node(NODE, labels={DEPLOY_LABEL: "true"} if labels is None else labels)
        kubelet = FakeKubelet(api, fake, node_name=NODE, socket_path=socket_path, **options)
        kubelet.start()
        started.append(kubelet)
        return kubelet

    yield make
    for kubelet in started:
        kubelet.stop()
