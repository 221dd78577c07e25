"""The node's stop gives the host's iptables back as it found them (firewall.py)."""

from __future__ import annotations

import subprocess

from tests.realnode import firewall

CHAIN = "KUBE-MIGAGENT-TEST"


def test_chains_that_appeared_go_with_the_rules_that_jump_to_them_and_the_others_stay(host_lock: None) -> None:
    # Under the real node's lock: a second run's test would add the same chain, and its node's kubelet
    # chains would count among those that "appeared" here and be removed from under it.
    before = firewall.kube_chains()
    try:
        subprocess.run(["iptables", "-t", "filter", "-N", CHAIN], check=True)
        subprocess.run(["iptables", "-t", "filter", "-A", "OUTPUT", "-j", CHAIN], check=True)
        subprocess.run(["iptables", "-t", "filter", "-A", CHAIN, "-d", "192.0.2.254/32", "-j", "RETURN"], check=True)
        assert ("iptables", "filter", CHAIN) in firewall.kube_chains()

        firewall.remove_new_chains(before)

        assert firewall.kube_chains() == before
        rules = subprocess.run(["iptables", "-t", "filter", "-S", "OUTPUT"], capture_output=True, text=True,
                               check=True)
        assert CHAIN not in rules.stdout
    finally:  # whatever failed, the host keeps none of it (check=False: gone already when the test passed)
        while subprocess.run(["iptables", "-t", "filter", "-D", "OUTPUT", "-j", CHAIN], capture_output=True,
                             check=False).returncode == 0:
            pass
        subprocess.run(["iptables", "-t", "filter", "-F", CHAIN], capture_output=True, check=False)
        subprocess.run(["iptables", "-t", "filter", "-X", CHAIN], capture_output=True, check=False)
