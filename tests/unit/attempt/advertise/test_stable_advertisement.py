"""Waiting for an advertisement the agent cannot predict exactly: it must match and hold still."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from migagent.attempt.advertise.expectation import Expectation, ResourceExpectation
from migagent.attempt.advertise.wait import AdvertisementTimeoutError, wait_for_advertisement
from migagent.clock import FakeClock
from migagent.node.port import NodeView

ONE_G = "nvidia.com/mig-1g.10gb"
UNKNOWN = Expectation(
    (ResourceExpectation(ONE_G, 7, (ONE_G, ONE_G + ".shared"), None),), note="replicas not known", stable_s=3.0
)


class _Node:
    """A Node whose allocatable steps through `steps` (one per read), then stays at the last."""

    def __init__(self, steps: Sequence[Mapping[str, int]]) -> None:
        self._steps = list(steps)
        self.reads = 0

    def get_node(self) -> NodeView:
        allocatable = self._steps[min(self.reads, len(self._steps) - 1)]
        self.reads += 1
        return NodeView(name="n", uid="u", resource_version=str(self.reads), allocatable=dict(allocatable))


def test_an_inexact_expectation_is_met_only_after_the_advertisement_held_still_for_stable_s() -> None:
    # The plugin re-registers: 0, then 7 (a first partial count), then 14 from the fourth read on.
    node = _Node([{ONE_G: 0}, {ONE_G: 7}, {ONE_G: 14}, {ONE_G: 14}])
    clock = FakeClock()

    found = wait_for_advertisement(node.get_node, UNKNOWN, timeout_s=60, clock=clock, poll_interval_s=1.0)

    assert found.allocatable == {ONE_G: 14}
    assert clock.elapsed == pytest.approx(5.0)  # 7 seen at t=1 but changed at t=2; 14 held from t=2 to t=5


def test_an_exact_expectation_is_met_at_the_first_match() -> None:
    node = _Node([{ONE_G: 0}, {ONE_G: 14}])
    clock = FakeClock()
    exact = Expectation((ResourceExpectation(ONE_G, 7, (ONE_G,), 14),))

    wait_for_advertisement(node.get_node, exact, timeout_s=60, clock=clock, poll_interval_s=1.0)

    assert clock.elapsed == pytest.approx(1.0)


def test_an_advertisement_that_never_settles_times_out_naming_what_is_unknown() -> None:
    node = _Node([{ONE_G: 7 + i} for i in range(100)])
    with pytest.raises(AdvertisementTimeoutError, match="did not hold still"):
        wait_for_advertisement(node.get_node, UNKNOWN, timeout_s=10, clock=FakeClock(), poll_interval_s=1.0)


def test_a_probe_that_never_passes_keeps_the_settle_wait_from_accepting_and_is_named_on_timeout() -> None:
    node = _Node([{ONE_G: 14}])
    exact = Expectation((ResourceExpectation(ONE_G, 7, (ONE_G,), 14),), probe=lambda: "ResourceSlices stale")
    with pytest.raises(AdvertisementTimeoutError, match="ResourceSlices stale"):
        wait_for_advertisement(node.get_node, exact, timeout_s=5, clock=FakeClock(), poll_interval_s=1.0)
