"""One list serves every equality selector; the wait for the new advertisement follows the Node watch
the agent holds (no request while the watch answers) and reads the Node only when the watch is quiet."""

from __future__ import annotations

import pytest

from migagent.attempt.advertise.wait import WATCH_QUIET_S, AdvertisementTimeoutError, wait_for_advertisement
from migagent.clock import FakeClock
from migagent.node.port import NodeView
from migagent.node.selectors import parse_equality

EXPECTED = {"nvidia.com/mig-1g.10gb": 7}


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("app=nvidia-dcgm", {"app": "nvidia-dcgm"}, True),
        ("app==nvidia-dcgm", {"app": "nvidia-dcgm-exporter"}, False),
        ("app=a,tier!=b", {"app": "a", "tier": "c"}, True),
        ("app=a,tier!=b", {"app": "a", "tier": "b"}, False),
        ("gpu", {"gpu": ""}, True),
        ("!gpu", {"gpu": ""}, False),
        ("!gpu", {}, True),
    ],
)
def test_equality_selectors_match_as_the_api_server_would(selector: str, labels: dict[str, str], matches: bool) -> None:
    matcher = parse_equality(selector)
    assert matcher is not None
    assert matcher(labels) is matches


@pytest.mark.parametrize("selector", ["app in (a,b)", "app notin (a)", "!app=b", "app=a b"])
def test_other_selectors_are_left_to_the_server(selector: str) -> None:
    assert parse_equality(selector) is None


def _node(count: int, rv: int) -> NodeView:
    return NodeView(name="n", uid="u", resource_version=str(rv), allocatable={"nvidia.com/mig-1g.10gb": count})


class Watch:
    """Delivers `nodes` one per wait; FakeClock time passes only while nothing is delivered."""

    def __init__(self, clock: FakeClock, nodes: list[NodeView]) -> None:
        self.clock = clock
        self.nodes = nodes
        self.seq = 1 if nodes else 0
        self.watching = True

    def node_after(self, seen: int, timeout_s: float) -> tuple[int, NodeView | None]:
        if self.seq <= seen and timeout_s > 0:
            if self.seq < len(self.nodes):
                self.seq += 1
            else:
                self.clock.advance(timeout_s)
        return self.seq, self.nodes[self.seq - 1] if self.seq else None


class Reads:
    def __init__(self, node: NodeView) -> None:
        self.node = node
        self.gets = 0

    def get_node(self) -> NodeView:
        self.gets += 1
        return self.node


def test_a_node_event_with_the_new_resources_ends_the_wait_without_a_request() -> None:
    clock = FakeClock()
    reads = Reads(_node(0, 1))
    watch = Watch(clock, [_node(0, 1), _node(3, 2), _node(7, 3)])
    node = wait_for_advertisement(reads.get_node, EXPECTED, timeout_s=30, clock=clock, updates=watch)
    assert node.resource_version == "3"
    assert reads.gets == 0


def test_a_quiet_watch_is_backed_by_a_read_of_the_node() -> None:
    clock = FakeClock()
    reads = Reads(_node(7, 9))
    watch = Watch(clock, [_node(0, 1)])
    checks: list[float] = []
    node = wait_for_advertisement(
        reads.get_node, EXPECTED, timeout_s=30, clock=clock, updates=watch,
        checkpoint=lambda: checks.append(clock.monotonic()),
    )
    assert node.resource_version == "9"
    assert reads.gets == 1
    assert clock.monotonic() == pytest.approx(WATCH_QUIET_S)
    assert len(checks) > 2  # the label checkpoint runs while waiting, not only at the ends


def test_the_watched_wait_times_out_naming_what_is_missing() -> None:
    clock = FakeClock()
    with pytest.raises(AdvertisementTimeoutError, match="advertised 0, expected 7"):
        wait_for_advertisement(
            Reads(_node(0, 1)).get_node, EXPECTED, timeout_s=12, clock=clock, updates=Watch(clock, [_node(0, 1)])
        )


def test_without_a_running_watch_the_node_is_polled() -> None:
    clock = FakeClock()
    reads = Reads(_node(7, 4))
    watch = Watch(clock, [_node(0, 1)])
    watch.watching = False
    node = wait_for_advertisement(
        reads.get_node, EXPECTED, timeout_s=30, clock=clock, updates=watch, poll_interval_s=0.5
    )
    assert node.resource_version == "4"
    assert reads.gets == 1
    assert clock.monotonic() == 0
