from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from structlog.testing import capture_logs

from migagent.attempt.phases import AgentPhase, Outcome
from migagent.cli import main
from migagent.clock import FakeClock
from migagent.errors import MigAgentError
from migagent.plumbing.health import HealthState
from migagent.plumbing.metrics import PrometheusMetrics
from migagent.plumbing.serve import start_observability


@dataclass(frozen=True)
class Served:
    url: str
    clock: FakeClock
    health: HealthState
    metrics: PrometheusMetrics


@pytest.fixture
def served() -> Iterator[Served]:
    clock = FakeClock()
    health = HealthState(clock, stale_after_s=30)
    metrics, server = start_observability(0, "127.0.0.1", health)
    try:
        yield Served(server.url, clock, health, metrics)
    finally:
        server()


def get(url: str) -> tuple[int, str, str]:
    """(status, content type, body) of a GET, for 2xx and error statuses alike."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers["Content-Type"], error.read().decode()


def test_metrics_endpoint_serves_every_agent_series_in_prometheus_text_format(served: Served) -> None:
    served.metrics.reconcile_finished(Outcome.APPLIED, 4.0)
    served.metrics.phase_finished(AgentPhase.DRAIN, 2.0)
    served.metrics.instances_changed(1, 2, 3)
    served.metrics.layout_applied("all-1g.10gb")
    status, content_type, body = get(served.url + "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain; version=0.0.4")
    assert 'migagent_reconciles_total{outcome="applied"} 1.0' in body
    assert 'migagent_gpu_instances_total{action="created"} 3.0' in body
    assert 'migagent_phase_duration_seconds_count{phase="drain"} 1.0' in body
    assert 'migagent_layout_info{layout="all-1g.10gb"} 1.0' in body
    assert "\nmigagent_pods_evicted_total 0.0\n" in body
    assert "\nmigagent_gpus_reset_total 0.0\n" in body
    assert "\nmigagent_reconcile_duration_seconds_count 1.0\n" in body


def test_healthz_is_200_while_the_heartbeat_is_fresh_and_503_once_it_is_stale(served: Served) -> None:
    assert get(served.url + "/healthz")[0] == 200
    served.clock.advance(31)
    status, content_type, body = get(served.url + "/healthz")
    assert status == 503
    assert content_type.startswith("text/plain")
    assert "heartbeat is 31s old" in body
    served.health.heartbeat()
    assert get(served.url + "/healthz")[0] == 200


def test_readyz_is_503_until_the_agent_reports_ready_then_200(served: Served) -> None:
    status, _, body = get(served.url + "/readyz")
    assert status == 503
    assert "not observed" in body
    served.health.set_ready(True)
    assert get(served.url + "/readyz") == (200, "text/plain; charset=utf-8", "ok\n")


def test_readyz_turns_503_when_the_agent_is_wedged(served: Served) -> None:
    served.health.set_ready(True)
    served.clock.advance(31)
    assert get(served.url + "/readyz")[0] == 503


def test_an_unknown_path_is_404_and_names_the_paths_served(served: Served) -> None:
    status, _, body = get(served.url + "/")
    assert status == 404
    assert "/metrics" in body
    assert "/healthz" in body


def test_the_bound_address_is_logged_so_an_ephemeral_port_can_be_found() -> None:
    health = HealthState(FakeClock())
    with capture_logs() as logs:
        _, server = start_observability(0, "127.0.0.1", health)
    try:
        assert {"event": "observability_serving", "url": server.url}.items() <= logs[0].items()
        assert server.port > 0
    finally:
        server()


def test_a_port_already_in_use_is_a_setting_error_naming_the_port_and_the_flags_to_change() -> None:
    health = HealthState(FakeClock())
    _, first = start_observability(0, "127.0.0.1", health)
    try:
        # A MigAgentError: the CLI prints it as one line and exits 1, not as an "internal error".
        with pytest.raises(MigAgentError, match=rf"127\.0\.0\.1:{first.port}: .*--metrics-port"):
            start_observability(first.port, "127.0.0.1", health)
    finally:
        first()


def test_migagent_demo_with_a_busy_metrics_port_says_so_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    health = HealthState(FakeClock())
    _, first = start_observability(0, "0.0.0.0", health)
    try:
        with capture_logs():
            code = main(["demo", "--metrics-port", str(first.port), "--timeout", "30"])
    finally:
        first()
    err = capsys.readouterr().err
    assert code == 1
    assert f"migagent demo: cannot serve metrics on 0.0.0.0:{first.port}" in err
    assert "internal error" not in err


def test_after_stop_the_port_no_longer_answers() -> None:
    _, server = start_observability(0, "127.0.0.1", HealthState(FakeClock()))
    url = server.url
    server()
    server()  # stopping twice is harmless
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/healthz", timeout=5)
