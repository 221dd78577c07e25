"""Liveness fails when the node label watch thread is stuck or gone, not only when the main loop is."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from migagent.clock import FakeClock
from migagent.node.port import NodeEvent, NodeView
from migagent.plumbing.health import HealthState
from migagent.sources.node_label import NodeLabelSource, WatchSettings


class HangingApi:
    """A GET that blocks until released: what a call without a timeout does against a silent server."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def get_node(self) -> NodeView:
        self.entered.set()
        self.release.wait(10)
        raise RuntimeError("released")

    def watch_node(self, resource_version: str, timeout_s: float) -> Iterator[NodeEvent]:
        return iter(())


def test_liveness_fails_when_the_watch_thread_makes_no_progress_past_its_bound() -> None:
    clock = FakeClock()
    api = HangingApi()
    settings = WatchSettings(watch_timeout_s=60, request_timeout_s=5, backoff_max_s=1)
    source = NodeLabelSource(api, clock=clock, settings=settings)
    health = HealthState(clock, stale_after_s=10_000)
    health.add_liveness_check(source.stuck)
    source.start()
    try:
        assert api.entered.wait(5)
        clock.advance(settings.stuck_after_s)
        assert health.liveness().ok
        clock.advance(1)
        verdict = health.liveness()
        assert not verdict.ok
        assert "watch thread has made no progress" in verdict.reason
    finally:
        api.release.set()
        source.stop()


def test_liveness_fails_when_the_watch_thread_has_ended() -> None:
    clock = FakeClock()
    source = NodeLabelSource(HangingApi(), clock=clock)
    health = HealthState(clock)
    health.add_liveness_check(source.stuck)
    source._thread = threading.Thread(target=lambda: None)  # a thread that ran and ended
    source._thread.start()
    source._thread.join()
    verdict = health.liveness()
    assert not verdict.ok
    assert "has ended" in verdict.reason
