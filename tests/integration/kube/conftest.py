"""Fixtures: a FakeApiServer with one GPU node, and migagent's KubeApi talking to it on a fake clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import structlog
from kubernetes.client import ApiClient

from migagent.clock import FakeClock
from migagent.kube.adapter import KubeApi
from migagent.kube.client import make_api_client
from migagent_sim.apiserver import FakeApiServer

NODE = "gpu-node-1"


class HookedClock(FakeClock):
    """A fake clock that runs `hooks` (oldest first) once the sleeping code has waited `at` seconds.

    This is how a test changes the cluster "while migagent waits" without threads or real time.
    """

    def __init__(self) -> None:
        super().__init__()
        self.hooks: list[tuple[float, Callable[[], object]]] = []

    def at(self, elapsed_s: float, hook: Callable[[], object]) -> None:
        self.hooks.append((elapsed_s, hook))
        self.hooks.sort(key=lambda item: item[0])

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        while self.hooks and self.hooks[0][0] <= self.elapsed:
            _, hook = self.hooks.pop(0)
            hook()


@pytest.fixture(autouse=True)
def logs() -> Iterator[list[dict[str, object]]]:
    """Capture structlog events: tests may assert on them, and output never goes to a stale stream.

    (A CLI test elsewhere configures structlog to print to the sys.stderr pytest had captured then.)
    """
    with structlog.testing.capture_logs() as captured:
        yield captured  # type: ignore[misc]


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    # The drain tests wait on a fake clock: deleted pods leave at once here (grace_scale 0). Waiting
    # for Terminating pods is covered by the kube_apiserver, kubelet and agent suites.
    with FakeApiServer(bookmark_interval_s=0.2, grace_scale=0) as fake:
        fake.add_node(NODE, labels={"nvidia.com/mig.config": "all-1g.5gb"}, allocatable={"nvidia.com/mig-1g.5gb": 7})
        yield fake


@pytest.fixture
def clock() -> HookedClock:
    return HookedClock()


@pytest.fixture
def api_client(server: FakeApiServer) -> Iterator[ApiClient]:
    with make_api_client(kubeconfig=None, api_server=server.url) as client:
        yield client


@pytest.fixture
def api(api_client: ApiClient, clock: HookedClock) -> KubeApi:
    return KubeApi(api_client, node_name=NODE, clock=clock)
