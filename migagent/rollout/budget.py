"""Budgets a wave must stay within: GPUs (or nodes) out of service, and every PodDisruptionBudget.

`--max-unavailable` counts GPUs by default (`16`), or nodes (`2nodes`), or a share of the pool's
GPUs (`25%`, rounded down). A node counts with all its GPUs: the agent cordons the whole node while
it changes. `Room` is the one place that budget is computed and enforced: the wave choice, the halt
when failed nodes leave no room, the refusal of a node that never fits and `rollout plan` all ask it.
The PDB check adds up the predicted evictions of every node of a wave, so two nodes never drain one
budget past what it allows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from migagent.rollout.impact import NodeImpact

Unit = Literal["gpus", "nodes", "percent"]
_SPEC = re.compile(r"(?P<count>\d+)\s*(?P<unit>%|gpus?|nodes?)?", re.IGNORECASE)


class BudgetSpecError(ValueError):
    """A --max-unavailable that is not N, Ngpus, Nnodes or N%; the message names the value, not the flag
    (the caller says where it came from: the flag, or the state object's field)."""


@dataclass(frozen=True)
class MaxUnavailable:
    count: int
    unit: Unit = "gpus"

    @classmethod
    def parse(cls, text: str) -> MaxUnavailable:
        match = _SPEC.fullmatch(text.strip())
        if match is None or int(match["count"]) < 1 or (match["unit"] == "%" and int(match["count"]) > 100):
            raise BudgetSpecError(
                f"{text!r}: give a positive number of GPUs (8 or 8gpus), of nodes (2nodes)"
                " or a percentage of the pool's GPUs (1-100%)"
            )
        unit = (match["unit"] or "gpus").lower()
        kind: Unit = "percent" if unit == "%" else "nodes" if unit.startswith("node") else "gpus"
        return cls(int(match["count"]), kind)

    @property
    def flag(self) -> str:
        """As the flag takes it (and the state object keeps it): `8`, `2nodes`, `25%`."""
        return {"gpus": f"{self.count}", "nodes": f"{self.count}nodes", "percent": f"{self.count}%"}[self.unit]

    def __str__(self) -> str:
        return {"gpus": f"{self.count} GPUs", "nodes": f"{self.count} nodes", "percent": f"{self.count}%"}[self.unit]

    def used(self, nodes: Sequence[NodeImpact]) -> int:
        """GPUs (unit gpus, percent) or nodes (unit nodes) that `nodes` take out of service."""
        return len(nodes) if self.unit == "nodes" else sum(n.gpus for n in nodes)


@dataclass(frozen=True)
class Room:
    """What --max-unavailable leaves a wave: its limit over the pool, less what is out of service already
    (failed nodes stay cordoned while their agents retry)."""

    budget: MaxUnavailable
    pool_gpus: int
    held: tuple[NodeImpact, ...] = ()

    @property
    def limit(self) -> int:
        """The most GPUs (unit gpus, percent) or nodes (unit nodes) out of service at once."""
        if self.budget.unit == "percent":
            return self.pool_gpus * self.budget.count // 100
        return self.budget.count

    def takes(self, wave: Sequence[NodeImpact]) -> bool:
        """Whether `wave` fits beside what is held: the one check of --max-unavailable."""
        return self.budget.used([*self.held, *wave]) <= self.limit

    def never_takes(self, node: NodeImpact) -> str | None:
        """Why `node` alone can never fit, even with nothing else out of service; None when it can."""
        if Room(self.budget, self.pool_gpus).takes([node]):
            return None
        return (
            f"node {node.node} has {node.gpus} GPUs but --max-unavailable {self.budget} allows {self.limit}"
            f" GPU(s) out of service at once; raise it to at least {node.gpus} GPUs"
        )

    def describe_held(self) -> str:
        return f"{len(self.held)} failed node(s) hold {self.budget.used(self.held)} of --max-unavailable {self.budget}"


class DisruptionBudget(Protocol):
    """A PodDisruptionBudget as the rollout needs it (node.budgets.PdbView satisfies it)."""

    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def disruptions_allowed(self) -> int | None: ...

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool: ...


def pdb_draws(
    nodes: Sequence[NodeImpact], budgets: Sequence[DisruptionBudget], pod_labels: Mapping[str, Mapping[str, str]]
) -> dict[str, int]:
    """`namespace/name` of each budget -> the predicted evictions it guards across `nodes`."""
    draws: dict[str, int] = {}
    for node in nodes:
        for pod in node.evicts:
            namespace = pod.partition("/")[0]
            labels = pod_labels.get(pod, {})
            for budget in budgets:
                if budget.selects(namespace, labels):
                    key = f"{budget.namespace}/{budget.name}"
                    draws[key] = draws.get(key, 0) + 1
    return draws


def pdb_overdraws(
    nodes: Sequence[NodeImpact], budgets: Sequence[DisruptionBudget], pod_labels: Mapping[str, Mapping[str, str]]
) -> list[str]:
    """Each budget the wave's predicted evictions would drive below its minimum, said in one line."""
    return pdb_overdrawn(pdb_draws(nodes, budgets, pod_labels), budgets)


def pdb_overdrawn(draws: Mapping[str, int], budgets: Sequence[DisruptionBudget]) -> list[str]:
    """Each budget `draws` (as `pdb_draws` counts them) drives below its minimum, said in one line."""
    allowed = {f"{b.namespace}/{b.name}": b.disruptions_allowed or 0 for b in budgets}
    return [
        f"PodDisruptionBudget {key} allows {allowed[key]} disruption(s), the wave would evict {drawn}"
        for key, drawn in sorted(draws.items())
        if drawn > allowed[key]
    ]


@dataclass(frozen=True)
class WaveChoice:
    nodes: tuple[NodeImpact, ...]
    held_back: tuple[str, ...]
    """Why each candidate left out was left out (budget, PDB)."""


def disturbance(node: NodeImpact) -> tuple[int, int, int, str]:
    """Least disturbing first: fewest evictions, then fewest GPUs changed, GIs destroyed, by name."""
    return (len(node.evicts), len(node.gpus_changed), node.gis_destroyed, node.node)


def choose_wave(
    candidates: Sequence[NodeImpact],
    *,
    room: Room,
    budgets: Sequence[DisruptionBudget],
    pod_labels: Mapping[str, Mapping[str, str]],
    max_nodes: int | None = None,
) -> WaveChoice:
    """The least disturbing candidates that fit together in `room` and every PDB."""
    chosen: list[NodeImpact] = []
    held: list[str] = []
    for node in sorted(candidates, key=disturbance):
        if max_nodes is not None and len(chosen) >= max_nodes:
            break
        if not room.takes([*chosen, node]):
            held.append(f"{node.node}: --max-unavailable {room.budget} has no room left in this wave")
            continue
        overdrawn = pdb_overdraws([*chosen, node], budgets, pod_labels)
        if overdrawn:
            held.append(f"{node.node}: {'; '.join(overdrawn)}")
            continue
        chosen.append(node)
    return WaveChoice(tuple(chosen), tuple(held))
