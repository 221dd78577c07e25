"""The node as the harness saw it over time, and what is read off it (pure: no I/O, no clock).

A `NodeSample` is taken from every Node the simulated kubelet's watch delivers, kept only when something
the comparison looks at changed: the state label, the layout label, the cordon, the operand deploy
labels and the advertised MIG resources. Times are seconds since the run's first label write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from migagent.node.names import DEPLOY_LABEL_PREFIX, MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL

JsonDict = dict[str, Any]
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


@dataclass(frozen=True)
class NodeSample:
    t: float
    state: str | None
    layout: str | None
    cordoned: bool
    deploy: tuple[tuple[str, str], ...]
    """(component, value) of every `nvidia.com/gpu.deploy.*` label, sorted."""
    advertised: Mapping[str, int] = field(default_factory=dict, hash=False)
    """Non-zero `nvidia.com/mig-*` resources in allocatable."""

    def same_as(self, other: NodeSample) -> bool:
        mine = (self.state, self.layout, self.cordoned, self.deploy, dict(self.advertised))
        return mine == (other.state, other.layout, other.cordoned, other.deploy, dict(other.advertised))


def sample(node: JsonDict, t: float) -> NodeSample:
    labels: Mapping[str, str] = node["metadata"].get("labels") or {}
    allocatable: Mapping[str, str] = (node.get("status") or {}).get("allocatable") or {}
    return NodeSample(
        t=t,
        state=labels.get(MIG_CONFIG_STATE_LABEL),
        layout=labels.get(MIG_CONFIG_LABEL),
        cordoned=bool((node.get("spec") or {}).get("unschedulable")),
        deploy=tuple(
            sorted(
                (k.removeprefix(DEPLOY_LABEL_PREFIX), v) for k, v in labels.items() if k.startswith(DEPLOY_LABEL_PREFIX)
            )
        ),
        advertised={k: int(v) for k, v in allocatable.items() if k.startswith(MIG_RESOURCE_PREFIX) and int(v)},
    )


def entries(samples: Sequence[NodeSample], holds: Callable[[NodeSample], bool], *, after: float) -> list[float]:
    """Each time from `after` on that `holds` became true after being seen false from `after` on: what
    held when the label was written (a `success` left over from the previous layout) is no entry."""
    times: list[float] = []
    before = True
    for s in (s for s in samples if s.t >= after):
        now = holds(s)
        if now and not before:
            times.append(s.t)
        before = now
    return times


def success_entries(samples: Sequence[NodeSample], layout: str, *, after: float) -> list[float]:
    """Each time from `after` on that the state label went to `success` from another value while the layout
    label named `layout` (a `success` left over from the previous layout is not one)."""
    times: list[float] = []
    previous: str | None = "success"
    for s in (s for s in samples if s.t >= after):
        if s.state == "success" and previous != "success" and s.layout == layout:
            times.append(s.t)
        previous = s.state
    return times


def advertised_entries(samples: Sequence[NodeSample], expected: Mapping[str, int], *, after: float) -> list[float]:
    """Each time allocatable came to hold exactly the `expected` MIG resources, after `after`."""
    return entries(samples, lambda s: dict(s.advertised) == dict(expected), after=after)


def first_state(samples: Sequence[NodeSample], state: str, *, after: float) -> float | None:
    return next((s.t for s in samples if s.t >= after and s.state == state), None)


def cordon_episodes(samples: Sequence[NodeSample]) -> int:
    episodes, before = 0, False
    for s in samples:
        if s.cordoned and not before:
            episodes += 1
        before = s.cordoned
    return episodes


def pause_episodes(samples: Sequence[NodeSample]) -> int:
    """How often the device plugin's deploy label went to `paused-for-mig-change`."""
    episodes, before = 0, False
    for s in samples:
        paused = dict(s.deploy).get("device-plugin") == "paused-for-mig-change"
        if paused and not before:
            episodes += 1
        before = paused
    return episodes


def _deploy_text(before: tuple[tuple[str, str], ...], after: tuple[tuple[str, str], ...]) -> str:
    """`operands paused-for-mig-change: dcgm, device-plugin`: the deploy labels that changed, by new value."""
    old = dict(before)
    by_value: dict[str, list[str]] = {}
    for component, value in after:
        if old.get(component) != value:
            by_value.setdefault(value, []).append(component)
    for component in old.keys() - dict(after).keys():
        by_value.setdefault("removed", []).append(component)
    return "; ".join(f"operands {value}: {', '.join(sorted(names))}" for value, names in by_value.items())


def _changes(previous: NodeSample | None, s: NodeSample) -> list[str]:
    changes: list[str] = []
    if previous is None or s.layout != previous.layout:
        changes.append(f"layout={s.layout}")
    if previous is None or s.state != previous.state:
        changes.append(f"state={s.state}")
    if previous is None or s.cordoned != previous.cordoned:
        changes.append("cordoned" if s.cordoned else "uncordoned")
    if previous is None or s.deploy != previous.deploy:
        changes.append(_deploy_text(() if previous is None else previous.deploy, s.deploy))
    if previous is None or dict(s.advertised) != dict(previous.advertised):
        changes.append(f"advertised {sum(s.advertised.values())} MIG devices")
    return changes


def events(samples: Sequence[NodeSample], marks: Sequence[tuple[float, str]] = ()) -> list[str]:
    """`+1.23s state=pending` lines: each change of the layout, state, cordon, operands or advertisement,
    and the harness's own `marks` (time, what it did: `[manager killed]`), in time order."""
    timed: list[tuple[float, str]] = [(t, f"[{text}]") for t, text in marks]
    previous: NodeSample | None = None
    for s in samples:
        changes = _changes(previous, s)
        if changes:
            timed.append((s.t, ", ".join(changes)))
        previous = s
    return [f"{t:+7.2f}s {text}" for t, text in sorted(timed, key=lambda item: item[0])]
