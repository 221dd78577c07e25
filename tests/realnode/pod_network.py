"""The node's pod subnet and its bridge: a /24 nothing on this machine routes yet, on a bridge made before
the kubelet starts and deleted when the node stops.

Why not one fixed subnet: a bridge outlives a run killed before its node stopped (SIGKILL, a session
ended under it), and keeps its address and its route. A new bridge on the same subnet adds a second
route to it, and the kernel keeps using the first: the host's packets to the new pods go to the dead
bridge. The kubelet's probes then fail with `dial tcp 10.233.0.4:8080: connect: no route to host`,
and the agent's connection to the API server times out (its SYN reaches the host, the answer does
not come back), so every test here failed at its first wait (CI at 6f093d5). Made by hand, the same
two bridges give `curl: (7) Failed to connect to 10.233.0.3 port 8080 after 3067 ms`.

The bridge is made at the node's start, not by the CNI bridge plugin at the first pod: its route is
then on the machine from the moment the subnet is chosen, and another node chooses past it. The
plugin takes a bridge that already has its gateway address as it is, so it also skips what it does
when it adds that address: set the bridge's MAC address. That is make_bridge's to do. A bridge whose
address was never set takes the lowest of its ports' addresses, so a pod's veth that comes and goes
(the device plugin's, restarted by each change) moves the gateway's address under the other pods.
A pod keeps the old one in its neighbour table until that entry fails, 30 s or more, and sends to
an address nothing answers meanwhile: the agent lost its lease and crash-looped on `Connection to
192.0.2.2 timed out` (suite-beside round 2 at 5b24aa8,
test_a_device_plugin_that_does_not_come_back_fails_the_change_clearly)."""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterable
from ipaddress import IPv4Interface, IPv4Network
from typing import Any

POD_SUBNETS = IPv4Network("10.233.0.0/16")
"""Where a node's /24 is chosen: the first one that overlaps nothing this machine routes or has as an
address."""


def taken_networks() -> list[IPv4Network]:
    """Every IPv4 destination this machine routes (all tables, the default route aside) and every
    network of an address on one of its links, up or down."""
    taken: list[IPv4Network] = []
    for route in ip_json("route", "show", "table", "all"):
        if route.get("dst", "default") != "default":
            taken.append(IPv4Network(route["dst"], strict=False))
    for link in ip_json("addr", "show"):
        for address in link.get("addr_info", []):
            taken.append(IPv4Interface(f"{address['local']}/{address['prefixlen']}").network)
    return taken


def free_pod_subnet(taken: Iterable[IPv4Network]) -> IPv4Network:
    """The first /24 of POD_SUBNETS that overlaps none of `taken`."""
    networks = list(taken)
    for subnet in POD_SUBNETS.subnets(new_prefix=24):
        if not any(subnet.overlaps(network) for network in networks):
            return subnet
    raise RuntimeError(f"every /24 of {POD_SUBNETS} is routed on this machine already: no pod subnet for a real node")


def gateway(subnet: IPv4Network) -> IPv4Interface:
    """The bridge's address: the subnet's first host, as the CNI bridge plugin would give it."""
    return IPv4Interface(f"{next(subnet.hosts())}/{subnet.prefixlen}")


def make_bridge(name: str, subnet: IPv4Network) -> None:
    """Up, with the subnet's gateway address and a MAC address of its own that no port changes."""
    for argv in (("link", "add", name, "address", bridge_mac(), "type", "bridge"),
                 ("addr", "add", str(gateway(subnet)), "dev", name), ("link", "set", name, "up")):  # fmt: skip
        subprocess.run(["ip", *argv], check=True, capture_output=True)


def bridge_mac() -> str:
    """A random unicast MAC address, locally administered (first octet 0x02): given when the link is
    made, the kernel keeps it as set rather than following the ports'."""
    return ":".join(f"{octet:02x}" for octet in (0x02, *secrets.token_bytes(5)))


def remove_bridge(name: str) -> None:
    """Gone, with its address and route; nothing to do when it is gone already."""
    subprocess.run(["ip", "link", "delete", name], check=False, capture_output=True)


def ip_json(*argv: str) -> list[dict[str, Any]]:
    shown = subprocess.run(["ip", "-j", "-4", *argv], capture_output=True, text=True, check=True)
    found: list[dict[str, Any]] = json.loads(shown.stdout or "[]")
    return found
