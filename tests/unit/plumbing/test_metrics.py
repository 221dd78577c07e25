from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from migagent.attempt.listener import AgentPhase, MetricsListener, Outcome
from migagent.plumbing.metrics import PrometheusMetrics


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_prometheus_metrics_satisfies_the_listener_protocol(registry: CollectorRegistry) -> None:
    listener: MetricsListener = PrometheusMetrics(registry)
    listener.pods_evicted(1)
    assert value(registry, "migagent_pods_evicted_total") == 1


def test_every_outcome_phase_and_action_series_exists_at_zero_before_any_reconcile(
    registry: CollectorRegistry,
) -> None:
    PrometheusMetrics(registry)
    for outcome in Outcome:
        assert value(registry, "migagent_reconciles_total", outcome=outcome.value) == 0
    for phase in AgentPhase:
        assert value(registry, "migagent_phase_duration_seconds_count", phase=phase.value) == 0
    for action in ("kept", "destroyed", "created"):
        assert value(registry, "migagent_gpu_instances_total", action=action) == 0
    assert value(registry, "migagent_gpus_reset_total") == 0


def test_a_finished_reconcile_counts_its_outcome_and_observes_its_duration(registry: CollectorRegistry) -> None:
    metrics = PrometheusMetrics(registry)
    metrics.reconcile_finished(Outcome.APPLIED, 12.5)
    metrics.reconcile_finished(Outcome.FAILED, 3.0)
    metrics.reconcile_finished(Outcome.APPLIED, 0.5)
    assert value(registry, "migagent_reconciles_total", outcome="applied") == 2
    assert value(registry, "migagent_reconciles_total", outcome="failed") == 1
    assert value(registry, "migagent_reconciles_total", outcome="unchanged") == 0
    assert value(registry, "migagent_reconcile_duration_seconds_count") == 3
    assert value(registry, "migagent_reconcile_duration_seconds_sum") == 16.0


def test_phase_durations_land_in_the_histogram_of_their_phase(registry: CollectorRegistry) -> None:
    metrics = PrometheusMetrics(registry)
    metrics.phase_finished(AgentPhase.DRAIN, 42.0)
    metrics.phase_finished(AgentPhase.APPLY, 2.0)
    assert value(registry, "migagent_phase_duration_seconds_sum", phase="drain") == 42.0
    assert value(registry, "migagent_phase_duration_seconds_count", phase="apply") == 1
    assert value(registry, "migagent_phase_duration_seconds_bucket", phase="drain", le="30.0") == 0
    assert value(registry, "migagent_phase_duration_seconds_bucket", phase="drain", le="60.0") == 1
    assert value(registry, "migagent_phase_duration_seconds_count", phase="observe") == 0


def test_a_negative_duration_from_a_stepped_clock_is_recorded_as_zero(registry: CollectorRegistry) -> None:
    metrics = PrometheusMetrics(registry)
    metrics.phase_finished(AgentPhase.PLAN, -0.001)
    assert value(registry, "migagent_phase_duration_seconds_sum", phase="plan") == 0
    assert value(registry, "migagent_phase_duration_seconds_count", phase="plan") == 1


def test_evictions_resets_and_waits_accumulate(registry: CollectorRegistry) -> None:
    metrics = PrometheusMetrics(registry)
    metrics.pods_evicted(3)
    metrics.pods_evicted(2)
    metrics.gpus_reset(1)
    metrics.drain_wait(7.0)
    metrics.readvertise_wait(11.0)
    metrics.readvertise_wait(1.0)
    assert value(registry, "migagent_pods_evicted_total") == 5
    assert value(registry, "migagent_gpus_reset_total") == 1
    assert value(registry, "migagent_drain_wait_seconds_sum") == 7.0
    assert value(registry, "migagent_drain_wait_seconds_count") == 1
    assert value(registry, "migagent_readvertise_wait_seconds_sum") == 12.0
    assert value(registry, "migagent_readvertise_wait_seconds_count") == 2


@given(st.lists(st.tuples(st.integers(0, 56), st.integers(0, 56), st.integers(0, 56)), max_size=20))
def test_instance_counters_are_the_sums_of_every_reported_change(changes: list[tuple[int, int, int]]) -> None:
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    for kept, destroyed, created in changes:
        metrics.instances_changed(kept, destroyed, created)
    assert value(registry, "migagent_gpu_instances_total", action="kept") == sum(c[0] for c in changes)
    assert value(registry, "migagent_gpu_instances_total", action="destroyed") == sum(c[1] for c in changes)
    assert value(registry, "migagent_gpu_instances_total", action="created") == sum(c[2] for c in changes)


def test_no_layout_info_sample_exists_before_a_layout_is_applied(registry: CollectorRegistry) -> None:
    PrometheusMetrics(registry)
    assert value(registry, "migagent_layout_info") is None
    assert value(registry, "migagent_layout_info", layout="") is None


def test_layout_info_names_only_the_layout_applied_last(registry: CollectorRegistry) -> None:
    metrics = PrometheusMetrics(registry)
    metrics.layout_applied("all-1g.10gb")
    metrics.layout_applied("all-3g.40gb")
    assert value(registry, "migagent_layout_info", layout="all-3g.40gb") == 1
    assert value(registry, "migagent_layout_info", layout="all-1g.10gb") is None


def test_two_agents_in_one_process_keep_separate_registries() -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    PrometheusMetrics(first).pods_evicted(4)
    PrometheusMetrics(second)
    assert value(first, "migagent_pods_evicted_total") == 4
    assert value(second, "migagent_pods_evicted_total") == 0
