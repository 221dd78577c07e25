"""`rollout plan`: the waves a rollout would run and what the pool keeps advertising meanwhile.

The waves are chosen as the driver chooses them (canary first, least disturbing first, within
--max-unavailable and every PDB as it allows now), assuming each wave's budgets recover before the
next. While a wave runs its nodes advertise nothing (cordoned); the capacity "during the worst
wave" is, per resource, the least the pool offers while any one wave runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from migagent.rollout.budget import DisruptionBudget, MaxUnavailable, Room, choose_wave
from migagent.rollout.impact import NodeImpact, total_capacity


@dataclass(frozen=True)
class Preview:
    nodes: tuple[NodeImpact, ...]
    waves: tuple[tuple[str, ...], ...]
    unplaced: tuple[str, ...]
    """Nodes no wave can take (each with the reason)."""
    before: dict[str, int]
    worst: dict[str, int]
    after: dict[str, int]

    def totals(self) -> dict[str, Any]:
        planned = [n for n in self.nodes if n.plannable]
        return {
            "nodes": len(self.nodes),
            "nodes_changed": sum(1 for n in planned if n.changes),
            "nodes_unchanged": sum(1 for n in planned if not n.changes),
            "nodes_problem": sum(1 for n in self.nodes if not n.plannable),
            "gpus_changed": sum(len(n.gpus_changed) for n in planned),
            "gis_destroyed": sum(n.gis_destroyed for n in planned),
            "gis_kept": sum(n.gis_kept for n in planned),
            "gis_created": sum(n.gis_created for n in planned),
            "resets": sum(n.resets for n in planned),
            "pods_evicted": sum(len(n.evicts) for n in planned),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": [n.to_json() for n in self.nodes],
            "waves": [list(w) for w in self.waves],
            "unplaced": list(self.unplaced),
            "totals": self.totals(),
            "capacity": {"before": self.before, "during_worst_wave": self.worst, "after": self.after},
        }


def preview(
    nodes: Sequence[NodeImpact],
    *,
    max_unavailable: MaxUnavailable,
    canary: int,
    budgets: Sequence[DisruptionBudget],
    pod_labels: Mapping[str, Mapping[str, str]],
) -> Preview:
    planned = [n for n in nodes if n.plannable]
    room = Room(max_unavailable, sum(n.gpus for n in planned))
    left = list(planned)
    waves: list[tuple[str, ...]] = []
    unplaced: list[str] = []
    while left:
        choice = choose_wave(
            left, room=room, budgets=budgets, pod_labels=pod_labels, max_nodes=canary if not waves else None,
        )
        if not choice.nodes:
            unplaced.extend(choice.held_back)
            break
        waves.append(tuple(n.node for n in choice.nodes))
        taken = {n.node for n in choice.nodes}
        left = [n for n in left if n.node not in taken]
    by_name = {n.node: n for n in planned}
    before = total_capacity(n.capacity_before for n in planned)
    after = total_capacity(n.capacity_after for n in planned)
    worst = dict(before)
    done: set[str] = set()
    for wave in waves:
        during = total_capacity(
            {} if name in wave else (by_name[name].capacity_after if name in done else by_name[name].capacity_before)
            for name in by_name
        )
        worst = {key: min(worst.get(key, 0), during.get(key, 0)) for key in set(worst) | set(during)}
        done.update(wave)
    return Preview(
        nodes=tuple(nodes), waves=tuple(waves), unplaced=tuple(unplaced), before=before,
        worst=dict(sorted(worst.items())), after=after,
    )
