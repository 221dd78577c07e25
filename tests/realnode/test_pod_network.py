"""A real node's pod subnet is one nothing on this machine routes yet (pod_network.py)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from ipaddress import IPv4Network

import pytest

from tests.realnode import pod_network

BRIDGE = "mgbridgetest"
"""A bridge of this test module's own, on the subnet a node would take next."""
POD_VETH = "mgvethtest"
LOWEST_MAC = "00:00:5e:00:53:01"
"""Lower than any address bridge_mac gives (RFC 7042's documentation range)."""


def test_the_first_slash_24_that_overlaps_no_route_or_address_is_chosen() -> None:
    taken = [IPv4Network("192.0.2.0/24"), IPv4Network("10.233.0.0/24"), IPv4Network("10.233.1.7/32")]

    assert pod_network.free_pod_subnet(taken) == IPv4Network("10.233.2.0/24")
    assert pod_network.free_pod_subnet([IPv4Network("192.0.2.0/24")]) == IPv4Network("10.233.0.0/24")


def test_a_route_wider_than_the_range_leaves_no_subnet_and_the_error_names_the_range() -> None:
    with pytest.raises(RuntimeError, match=r"10\.233\.0\.0/16"):
        pod_network.free_pod_subnet([IPv4Network("10.0.0.0/8")])


def test_a_bridge_left_on_a_subnet_is_passed_over_by_the_next_node(host_lock: None) -> None:
    # Under the real node's lock: the subnet a node of this run would take is the one this test makes stale.
    with _bridge_on_the_next_subnet() as chosen:
        assert chosen in pod_network.taken_networks()

        after = pod_network.free_pod_subnet(pod_network.taken_networks())

        assert not after.overlaps(chosen)
        assert after.subnet_of(pod_network.POD_SUBNETS)
    assert pod_network.free_pod_subnet(pod_network.taken_networks()) == chosen


def test_a_bridge_that_is_down_still_holds_its_subnet(host_lock: None) -> None:
    # Its route is gone with the link, its address is not: a node on the same subnet would answer ARP
    # for the same gateway once the old bridge came up again.
    with _bridge_on_the_next_subnet() as chosen:
        subprocess.run(["ip", "link", "set", BRIDGE, "down"], check=True)

        assert not pod_network.free_pod_subnet(pod_network.taken_networks()).overlaps(chosen)


def test_the_bridge_keeps_its_mac_address_while_a_port_with_a_lower_one_comes_and_goes(host_lock: None) -> None:
    # Unset, a bridge's MAC address follows its lowest port's: the pods' gateway would move under them
    # each time the device plugin's pod came and went (pod_network.py says what that cost).
    with _bridge_on_the_next_subnet():
        made = _mac(BRIDGE)
        try:
            subprocess.run(["ip", "link", "add", POD_VETH, "address", LOWEST_MAC, "type", "veth"], check=True)
            subprocess.run(["ip", "link", "set", POD_VETH, "master", BRIDGE, "up"], check=True)

            assert _mac(BRIDGE) == made
            subprocess.run(["ip", "link", "delete", POD_VETH], check=True)
            assert _mac(BRIDGE) == made
        finally:
            subprocess.run(["ip", "link", "delete", POD_VETH], check=False, capture_output=True)


@contextlib.contextmanager
def _bridge_on_the_next_subnet() -> Iterator[IPv4Network]:
    """BRIDGE made (pod_network.make_bridge) on the subnet a node would take next, and removed after."""
    chosen = pod_network.free_pod_subnet(pod_network.taken_networks())
    try:
        pod_network.make_bridge(BRIDGE, chosen)
        yield chosen
    finally:
        pod_network.remove_bridge(BRIDGE)


def _mac(link: str) -> str:
    return str(pod_network.ip_json("link", "show", link)[0]["address"])
