"""The node's stop gives the host's iptables back as it found them (firewall.py)."""

from __future__ import annotations

import subprocess

from tests.realnode import firewall

CHAIN = "KUBE-MIGAGENT-TEST"


def test_chains_that_appeared_go_with_the_rules_that_jump_to_them_and_the_others_stay() -> None:
    before = firewall.kube_chains()
    subprocess.run(["iptables", "-t", "filter", "-N", CHAIN], check=True)
    subprocess.run(["iptables", "-t", "filter", "-A", "OUTPUT", "-j", CHAIN], check=True)
    subprocess.run(["iptables", "-t", "filter", "-A", CHAIN, "-d", "192.0.2.254/32", "-j", "RETURN"], check=True)
    assert ("iptables", "filter", CHAIN) in firewall.kube_chains()

    firewall.remove_new_chains(before)

    assert firewall.kube_chains() == before
    rules = subprocess.run(["iptables", "-t", "filter", "-S", "OUTPUT"], capture_output=True, text=True, check=True)
    assert CHAIN not in rules.stdout
