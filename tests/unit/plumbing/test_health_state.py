from __future__ import annotations

import pytest

from migagent.clock import FakeClock
from migagent.plumbing.health import HealthState


def test_a_fresh_agent_is_alive_but_not_ready_until_it_has_observed_the_node() -> None:
    health = HealthState(FakeClock(), stale_after_s=60)
    assert health.liveness().ok
    readiness = health.readiness()
    assert not readiness.ok
    assert "not observed" in readiness.reason


def test_liveness_fails_once_the_heartbeat_is_older_than_the_limit() -> None:
    clock = FakeClock()
    health = HealthState(clock, stale_after_s=60)
    clock.advance(60)
    assert health.liveness().ok
    clock.advance(1)
    verdict = health.liveness()
    assert not verdict.ok
    assert "61s old" in verdict.reason


def test_a_heartbeat_makes_a_stale_agent_alive_again() -> None:
    clock = FakeClock()
    health = HealthState(clock, stale_after_s=10)
    clock.advance(30)
    assert not health.liveness().ok
    health.heartbeat()
    assert health.liveness().ok


def test_readiness_follows_set_ready_and_shows_the_reason_given() -> None:
    health = HealthState(FakeClock(), stale_after_s=10)
    health.set_ready(True)
    assert health.readiness().ok
    health.set_ready(False, "cannot read Node gpu-1: 403")
    verdict = health.readiness()
    assert not verdict.ok
    assert verdict.reason == "cannot read Node gpu-1: 403"


def test_a_ready_agent_whose_heartbeat_is_stale_is_not_ready() -> None:
    clock = FakeClock()
    health = HealthState(clock, stale_after_s=10)
    health.set_ready(True)
    clock.advance(11)
    verdict = health.readiness()
    assert not verdict.ok
    assert "heartbeat" in verdict.reason


def test_a_non_positive_staleness_limit_is_refused_with_the_parameter_named() -> None:
    with pytest.raises(ValueError, match="stale_after_s"):
        HealthState(FakeClock(), stale_after_s=0)
