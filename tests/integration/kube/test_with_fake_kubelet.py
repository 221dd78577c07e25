"""The kube pieces together with the fake kubelet: scoped drain, pause, re-advertise the new layout."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient

from migagent.attempt.advertise.expectation import advertisement_matches
from migagent.attempt.advertise.expected import expected_resources
from migagent.attempt.advertise.wait import wait_for_advertisement
from migagent.attempt.drain.drainer import Drainer
from migagent.attempt.drain.scope import disturbed_pods, evictable
from migagent.attempt.window.deviceplugin import GpuOperatorPause
from migagent.clock import FakeClock, SystemClock
from migagent.kube.adapter import KubeApi
from migagent.layout.observed import Observation
from migagent.node.port import PodView
from migagent.nvml import GpuDriver
from migagent.planning.model import GpuPlan, Plan
from migagent.podresources import PodResourcesClient
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner
from migagent_sim.apiserver import FakeApiServer
from migagent_sim.kubelet import FakeKubelet
from tests.integration.kubelet.support import lay_out

from .conftest import NODE


@pytest.fixture
def fake() -> FakeNvml:
    nvml = FakeNvml.from_spec("2xH100-80GB-SXM", mig_enabled=True)
    lay_out(nvml, 0, [("3g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)])
    lay_out(nvml, 1, [("7g.80gb", 0)])
    return nvml


@pytest.fixture
def kubelet(server: FakeApiServer, fake: FakeNvml) -> Iterator[FakeKubelet]:
    server.update_node(NODE, lambda n: n["metadata"]["labels"].update({"nvidia.com/gpu.deploy.device-plugin": "true"}))
    # A short directory: unix socket paths are limited to about 100 characters.
    with (
        tempfile.TemporaryDirectory(prefix="kk-") as short,
        FakeKubelet(server, fake, node_name=NODE, socket_path=str(Path(short) / "kubelet.sock")) as running,
    ):
        yield running


def _observe(fake: FakeNvml) -> Observation:
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        return driver.observe()


def test_a_partial_change_drains_one_pod_pauses_the_plugin_and_waits_for_the_new_advertisement(
    server: FakeApiServer, fake: FakeNvml, kubelet: FakeKubelet, api_client: ApiClient
) -> None:
    kubelet.run_workload("team", "on-3g", profile="3g.40gb")
    kubelet.run_workload("team", "on-2g", profile="2g.20gb")
    kubelet.run_workload("team", "on-7g", profile="7g.80gb")
    api = KubeApi(api_client, node_name=NODE, clock=FakeClock())
    before = _observe(fake)
    assert advertisement_matches(kubelet.advertised(), expected_resources(before)) == (True, {})

    two_g = before.gpu(0).gpu_instances[1]
    plan = Plan(gpus=(GpuPlan(gpu=0, keep=(), destroy=(two_g,), create=(), mode_change=None, reset=False),), steps=())
    holdings = PodResourcesClient(kubelet.socket_path).list()
    chosen = _to_evict(plan, before, holdings, api.list_pods_on_node())
    assert [p.ref.name for p in chosen] == ["on-2g"]
    Drainer(api, clock=FakeClock()).drain(chosen, timeout_s=60)
    assert {w.name for w in kubelet.workloads()} == {"on-3g", "on-7g"}

    restarter = GpuOperatorPause(api, clock=SystemClock(), poll_interval_s=0.02, timeout_s=10)
    paused = restarter.pause()
    assert kubelet.plugin_pod is None
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        gi = driver.observe().gpu(0).gi_at(two_g.placement)
        assert gi is not None
        for ci in gi.compute_instances:
            driver.destroy_compute_instance(0, gi_id=gi.id, ci_id=ci.id)
        driver.destroy_gpu_instance(0, gi_id=gi.id)
    lay_out(fake, 0, [("1g.10gb", 4), ("1g.10gb", 5)])
    restarter.resume(paused)

    expected = expected_resources(_observe(fake))
    assert expected["nvidia.com/mig-1g.10gb"] == 3
    node = wait_for_advertisement(api.get_node, expected, timeout_s=10, clock=SystemClock(), poll_interval_s=0.02)
    assert node.allocatable.get("nvidia.com/mig-2g.20gb", 0) == 0
    assert node.labels["nvidia.com/gpu.deploy.device-plugin"] == "true"


def _to_evict(*args: Any) -> list[PodView]:
    """The pods the drain moves: those a plan disturbs that may be evicted."""
    return [pod for pod in disturbed_pods(*args) if evictable(pod)]
