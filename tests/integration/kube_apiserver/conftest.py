"""Fixtures: a started FakeApiServer and real `kubernetes` client APIs pointed at it (proxy disabled)."""

from collections.abc import Iterator

import pytest
from kubernetes import client

from migagent_sim.apiserver import FakeApiServer

NODE = "gpu-node-1"


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer(bookmark_interval_s=0.2, grace_scale=0.01) as fake:
        fake.add_node(NODE, labels={"nvidia.com/mig.config": "all-disabled"}, allocatable={"nvidia.com/gpu": 8})
        yield fake


@pytest.fixture
def api_client(server: FakeApiServer) -> Iterator[client.ApiClient]:
    configuration = client.Configuration(host=server.url)
    configuration.proxy = None
    with client.ApiClient(configuration) as api:
        yield api


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def policy(api_client: client.ApiClient) -> client.PolicyV1Api:
    return client.PolicyV1Api(api_client)


@pytest.fixture
def apps(api_client: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


@pytest.fixture
def events_api(api_client: client.ApiClient) -> client.EventsV1Api:
    return client.EventsV1Api(api_client)
