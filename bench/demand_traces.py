"""Demand traces for `python -m bench.demand_bench`: GPU pods arriving over time, each asking one MIG device.

A trace is JSON (`--trace FILE` reads one; `--write-trace NAME FILE` writes a built-in one):

    {"name": "day", "seconds": 86400, "nodes": 6, "gpus": 8, "model": "H100-80GB-SXM",
     "start_layout": "all-balanced",
     "arrivals": [{"at": 12.5, "resource": "nvidia.com/mig-1g.10gb", "seconds": 1800,
                   "priority": 0, "patience": null}, ...]}

`at` is when the pod is created; `seconds` how long it runs once started (an evicted pod is replaced
and runs what it had left); `patience`, when set, how long its owner lets it wait before withdrawing it.
The built-in traces are seeded, so the same name always gives the same trace:

- `day`: 24 hours on 6 nodes of 8 H100. By day (08:00-20:00) inference: many short 1g.10gb pods,
  up to ~240 at once at the peak; by night training: 3g.40gb pods of 1-3 hours and a few whole-GPU
  7g.80gb pods of 2-4 hours; a trickle of each all the time.
- `alternating`: 2 hours on the same pool; every 3 minutes the wanted profile flips between 3g.40gb
  and 7g.80gb, and pods not started within 2 minutes are withdrawn: a demand that alternates faster
  than the autopilot's --persist (5 minutes), which must change nothing.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ONE_G = "nvidia.com/mig-1g.10gb"
THREE_G = "nvidia.com/mig-3g.40gb"
SEVEN_G = "nvidia.com/mig-7g.80gb"
HOUR = 3600.0


@dataclass(frozen=True)
class Arrival:
    at: float
    resource: str
    seconds: float
    priority: int = 0
    patience: float | None = None


@dataclass(frozen=True)
class Trace:
    name: str
    seconds: float
    arrivals: tuple[Arrival, ...]
    nodes: int = 6
    gpus: int = 8
    model: str = "H100-80GB-SXM"
    start_layout: str = "all-balanced"
    extra: dict[str, Any] = field(default_factory=dict, hash=False)

    def first(self, seconds: float) -> Trace:
        """The trace cut after `seconds`."""
        return replace(self, seconds=seconds, arrivals=tuple(a for a in self.arrivals if a.at < seconds))

    def scaled(self, factor: int) -> Trace:
        """`factor` times the nodes and the pods: each arrival `factor` times, a second apart."""
        arrivals = sorted((replace(a, at=a.at + i) for a in self.arrivals for i in range(factor)), key=lambda a: a.at)
        return replace(self, name=f"{self.name} x{factor}", nodes=self.nodes * factor, arrivals=tuple(arrivals))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "seconds": self.seconds, "nodes": self.nodes, "gpus": self.gpus, "model": self.model,
            "start_layout": self.start_layout,
            "arrivals": [{"at": round(a.at, 1), "resource": a.resource, "seconds": round(a.seconds, 1),
                          "priority": a.priority, "patience": a.patience} for a in self.arrivals],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trace:
        arrivals = tuple(
            Arrival(float(a["at"]), str(a["resource"]), float(a["seconds"]), int(a.get("priority", 0)),
                    None if a.get("patience") is None else float(a["patience"]))
            for a in data["arrivals"]
        )
        return cls(str(data["name"]), float(data["seconds"]), tuple(sorted(arrivals, key=lambda a: a.at)),
                   int(data.get("nodes", 6)), int(data.get("gpus", 8)), str(data.get("model", "H100-80GB-SXM")),
                   str(data.get("start_layout", "all-balanced")))


def load(path: Path) -> Trace:
    return Trace.from_json(json.loads(path.read_text(encoding="utf-8")))


def _poisson(rng: random.Random, rate_per_hour: float, start: float, end: float) -> list[float]:
    times: list[float] = []
    now = start
    while rate_per_hour > 0:
        now += rng.expovariate(rate_per_hour / HOUR)
        if now >= end:
            return times
        times.append(now)
    return times


def _daytime(hour: float) -> float:
    """0 at night, 1 at 14:00, a smooth bump between 08:00 and 20:00."""
    return max(0.0, math.sin(math.pi * (hour - 8.0) / 12.0)) if 8.0 <= hour <= 20.0 else 0.0


def day(seed: int = 26) -> Trace:
    rng = random.Random(seed)
    arrivals: list[Arrival] = []
    for hour in range(24):
        start = hour * HOUR
        bump = _daytime(hour + 0.5)
        for at in _poisson(rng, 30 + 420 * bump, start, start + HOUR):  # inference: ~30 min each
            arrivals.append(Arrival(at, ONE_G, rng.uniform(600, 3000)))
        night = 1.0 - bump
        for at in _poisson(rng, 2 + 14 * night, start, start + HOUR):  # training: 1-3 h on a 3g.40gb
            arrivals.append(Arrival(at, THREE_G, rng.uniform(HOUR, 3 * HOUR)))
        for at in _poisson(rng, 0.3 + 2.0 * night, start, start + HOUR):  # a whole GPU: 2-4 h
            arrivals.append(Arrival(at, SEVEN_G, rng.uniform(2 * HOUR, 4 * HOUR)))
    return Trace("day", 24 * HOUR, tuple(sorted(arrivals, key=lambda a: a.at)))


def alternating(seed: int = 26) -> Trace:
    rng = random.Random(seed)
    arrivals: list[Arrival] = []
    period = 180.0
    for index in range(int(2 * HOUR / period)):
        resource = THREE_G if index % 2 == 0 else SEVEN_G
        for at in _poisson(rng, 240, index * period, (index + 1) * period):
            arrivals.append(Arrival(at, resource, rng.uniform(300, 900), patience=120.0))
    return Trace("alternating", 2 * HOUR, tuple(sorted(arrivals, key=lambda a: a.at)))


BUILT_IN = {"day": day, "alternating": alternating}
