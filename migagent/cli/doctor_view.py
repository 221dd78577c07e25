"""`migagent doctor` for people: a summary first, then identical GPUs once (as `plan` groups them).

Eight GPUs of one model report the same profiles, settings and differences from the catalog; only
their index, UUID and PCI bus id differ. The YAML a person reads shows such a group once, with
those three per GPU, after a summary of the node: each group in a line, and whether anything was
found that would block a GPU reset. `-o json` keeps one entry per GPU for programs.
"""

from __future__ import annotations

from typing import Any

from migagent.layout.gpus import gpu_ranges, gpus_named

_IDENTITY = ("index", "uuid", "pci_bus_id")
"""What differs between otherwise identical GPUs."""
SIMULATED_NODE = (
    "not checked: a simulated node has no host to check (kernel modules, nvidia-persistenced,"
    " processes holding /dev/nvidia*)"
)
NOTHING_BLOCKS = "nothing found that would block a GPU reset"


class Inline(dict[str, Any]):
    """A small mapping printed on one line (`{index: 0, uuid: ..., pci_bus_id: ...}`)."""


def _shared(gpu: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The GPU's document apart from its identity, as a hashable key (values compared by their repr)."""
    return tuple((key, repr(value)) for key, value in gpu.items() if key not in _IDENTITY)


def _groups(gpus: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    groups: dict[tuple[tuple[str, str], ...], list[dict[str, Any]]] = {}
    for gpu in gpus:
        groups.setdefault(_shared(gpu), []).append(gpu)
    return list(groups.values())


def _group_document(members: list[dict[str, Any]]) -> dict[str, Any]:
    first = members[0]
    if len(members) == 1:
        return first
    shared = {key: value for key, value in first.items() if key not in _IDENTITY}
    identities = [Inline((key, gpu[key]) for key in _IDENTITY) for gpu in members]
    return {"indices": gpu_ranges(gpu["index"] for gpu in members), "gpus": identities, **shared}


def _mig_text(mig: dict[str, Any]) -> str:
    if not mig.get("capable"):
        return "not MIG capable"
    text = f"MIG {'on' if mig.get('current') else 'off'}"
    if mig.get("pending") != mig.get("current"):
        text += f", {'on' if mig.get('pending') else 'off'} pending"
    return text


def _group_line(members: list[dict[str, Any]]) -> str:
    gpu = members[0]
    row = gpu.get("catalog_row") or "no catalog row"
    diff = gpu.get("diff_against_catalog") or []
    differs = "as the catalog says" if not diff else f"{len(diff)} difference(s) from the catalog, below"
    return f"{gpus_named(g['index'] for g in members)}: {gpu['name']} ({row}), {_mig_text(gpu['mig'])}; {differs}"


def _reset_line(preconditions: list[str]) -> str:
    if preconditions in ([SIMULATED_NODE], [NOTHING_BLOCKS]):
        return f"GPU reset: {preconditions[0]}"
    return f"GPU reset: {len(preconditions)} thing(s) would block it, listed under reset_preconditions"


def summary(document: dict[str, Any]) -> list[str]:
    """A line per group of identical GPUs, then whether anything would block a GPU reset."""
    return [_group_line(members) for members in _groups(document["gpus"])] + [
        _reset_line(document["reset_preconditions"])
    ]


def readable_document(document: dict[str, Any]) -> dict[str, Any]:
    """`document` (node_document's, summary first) with identical GPUs grouped."""
    return {**document, "gpus": [_group_document(members) for members in _groups(document["gpus"])]}
