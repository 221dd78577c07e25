"""The kubelet's iptables chains, removed when the node stops.

The kubelet shares the host's network namespace (its pods reach the API server on the host's
address), and at start it creates KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY and KUBE-FIREWALL (with
jumps from INPUT and OUTPUT) in both address families, with no setting to stop it
(pkg/kubelet/kubelet_network_linux.go). A host that had none of them before the node started gets
none back after it: the chains that appeared are emptied, the rules that jump to them deleted, then
the chains."""

from __future__ import annotations

import shlex
import shutil
import subprocess

FAMILIES = ("iptables", "ip6tables")
Chain = tuple[str, str, str]
"""(command, table, chain)"""


def kube_chains() -> set[Chain]:
    chains: set[Chain] = set()
    for command, table, line in _saved():
        if line.startswith(":KUBE-"):
            chains.add((command, table, line[1:].split()[0]))
    return chains


def remove_new_chains(before: set[Chain]) -> None:
    new = kube_chains() - before
    for command, table, line in _saved():
        words = shlex.split(line)
        if words[:1] != ["-A"] or (command, table, words[1]) in new:
            continue
        target = words[words.index("-j") + 1] if "-j" in words else ""
        if (command, table, target) in new:
            subprocess.run([command, "-t", table, "-D", *words[1:]], check=False, capture_output=True)
    for command, table, chain in sorted(new):
        subprocess.run([command, "-t", table, "-F", chain], check=False, capture_output=True)
    for command, table, chain in sorted(new):
        subprocess.run([command, "-t", table, "-X", chain], check=False, capture_output=True)


def _saved() -> list[tuple[str, str, str]]:
    """Every line of each family's `-save` output, with its command and table."""
    lines = []
    for command in FAMILIES:
        if shutil.which(f"{command}-save") is None:
            continue
        out = subprocess.run([f"{command}-save"], capture_output=True, text=True, check=False).stdout
        table = ""
        for line in out.splitlines():
            if line.startswith("*"):
                table = line[1:]
            elif table:
                lines.append((command, table, line))
    return lines
