"""/metrics, /healthz and /readyz of the real agent wiring while it reconfigures a simulated node.

The agent is built exactly as `migagent agent` builds it (`cli.agent.build_agent`, the listener and
health state from `plumbing.serve.start_observability`), against the simulator `migagent demo` uses.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from migagent.attempt.phases import AgentPhase
from migagent.clock import SystemClock
from migagent.node.names import MIG_CONFIG_STATE_LABEL
from migagent.plumbing.health import HealthState
from migagent.plumbing.serve import start_observability
from migagent.reconcile.journal import FileJournal
from migagent.wiring import build_agent
from migagent_sim.cluster import RunningAgent, SimCluster, SimClusterConfig
from migagent_sim.deadline import Deadline

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

LISTED_SERIES = (
    "migagent_reconciles_total",
    "migagent_reconcile_duration_seconds_count",
    "migagent_phase_duration_seconds_count",
    "migagent_pods_evicted_total",
    "migagent_gpu_instances_total",
    "migagent_gpus_reset_total",
    "migagent_drain_wait_seconds_count",
    "migagent_readvertise_wait_seconds_count",
    "migagent_layout_info",
)


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def sample(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        with error:
            return error.code


def wait_until(check: Callable[[], bool], *, what: str, timeout_s: float = 60.0) -> None:
    deadline = Deadline(timeout_s)
    while not check():
        if deadline.passed():
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SimCluster]:
    with SimCluster(tmp_path, SimClusterConfig(spec="2xH100-80GB-SXM", start_layout="all-1g.10gb")) as sim:
        yield sim


def test_metrics_expose_every_listed_series_during_and_after_a_reconfiguration(cluster: SimCluster) -> None:
    clock = SystemClock()
    health = HealthState(clock, stale_after_s=60)
    metrics, server = start_observability(0, "127.0.0.1", health)
    during_drain: list[Samples] = []

    def scrape_at_drain(phase: AgentPhase) -> None:
        if phase is AgentPhase.DRAIN:
            during_drain.append(scrape(server.url))

    options = cluster.options()
    api = cluster.agent_api(options, clock=clock)
    agent, source = build_agent(
        options,
        api=api,
        driver=cluster.driver(),
        journal=FileJournal(cluster.journal_dir),
        clock=clock,
        listener=metrics,
        health=health,
        phase_hook=scrape_at_drain,
    )
    # A pod on a GPU instance that all-balanced destroys, so there is something to drain.
    cluster.kubelet.run_workload("ml", "train-0", mig_uuid=cluster.mig_uuid(0, 4))
    running = RunningAgent(agent, source).start()
    try:
        assert status_of(server.url + "/healthz") == 200
        wait_until(lambda: status_of(server.url + "/readyz") == 200, what="/readyz after the first observation")
        wait_until(lambda: state(cluster) == "success", what="the starting layout reported")
        cluster.label("all-balanced")
        # The attempt's outcome is the last thing it records: migagent_layout_info names the new layout a
        # moment before the count of applied reconciles goes up (test_demo_metrics, at load 19, scraped
        # between the two and saw the layout with no applied reconcile yet).
        wait_until(
            lambda: sample(scrape(server.url), "migagent_reconciles_total", outcome="applied") == 1,
            what="the change counted in migagent_reconciles_total{outcome=applied}",
        )
        after = scrape(server.url)
    finally:
        running.stop()
        server()

    (drain,) = during_drain
    assert (sample(drain, "migagent_phase_duration_seconds_count", phase="observe") or 0) >= 2
    assert sample(drain, "migagent_phase_duration_seconds_count", phase="drain") == 0
    assert sample(drain, "migagent_pods_evicted_total") == 0

    names = {name for name, _ in after}
    assert set(LISTED_SERIES) <= names, f"missing: {set(LISTED_SERIES) - names}"
    assert sample(after, "migagent_layout_info", layout="all-balanced") == 1
    assert (sample(after, "migagent_reconciles_total", outcome="unchanged") or 0) >= 1
    assert sample(after, "migagent_pods_evicted_total") == 1
    assert sample(after, "migagent_phase_duration_seconds_count", phase="drain") == 1
    assert sample(after, "migagent_drain_wait_seconds_count") == 1
    assert sample(after, "migagent_readvertise_wait_seconds_count") == 1
    assert sample(after, "migagent_gpus_reset_total") == 0
    # Two H100s, seven 1g.10gb each -> two 1g.10gb kept and five destroyed per GPU, a 2g and a 3g created.
    assert sample(after, "migagent_gpu_instances_total", action="kept") == 4
    assert sample(after, "migagent_gpu_instances_total", action="destroyed") == 10
    assert sample(after, "migagent_gpu_instances_total", action="created") == 4
    assert sample(after, "migagent_layout_info", layout="all-1g.10gb") is None


def state(cluster: SimCluster) -> str | None:
    labels: dict[str, str] = cluster.node()["metadata"].get("labels", {})
    return labels.get(MIG_CONFIG_STATE_LABEL)
