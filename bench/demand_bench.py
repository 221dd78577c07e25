"""Demand bench: replay GPU demand traces against a static layout, the autopilot, and an oracle.

    python -m bench.demand_bench                      # the built-in traces (bench/demand_traces.py)
    python -m bench.demand_bench --trace FILE.json    # any trace in that format (held-out ones too)
    python -m bench.demand_bench --write-trace day day.json
    python -m bench.demand_bench --scale 16 --hours 6 # 16 times the nodes and the pods (96 nodes)

The pool is the in-memory model (simulator/migagent_sim/model_pool.py): nodes of 8 H100 whose GPU
instances, pods and agents are modelled, on a fake clock, so a day of trace time replays in minutes.
What is not modelled is what decides: the autopilot is the production `Autopilot` (advice, guardrails,
rollouts through the rollout's own driver) over that pool's port; the agents plan with the production
planner; the layout file is the shipped configs/mig-layouts/mig-layouts.yaml. A relabelled node is
out of service for --reconfigure seconds (60 by default: the device plugin's restart dominates on
hardware; nos reports "at most ~30 s" from a pending pod to a usable slice), then holds its new layout.
The scheduler binds pending pods (highest priority first, then oldest) to the first free device of
what they ask, every tick (10 s).

Policies:
- static: the trace's start layout (all-balanced) on every node, never changed;
- autopilot: `migagent autopilot` with its shipped defaults (--persist 300, --cooldown 3600,
  --max-changes-per-hour 2 per pool; here one pool of all nodes), looking every 60 s;
- oracle: at every tick, for each resource still waiting, each node's idle GPU instances are
  repartitioned at once and for free (the per-GPU packing of `advise --generate`; never evicting),
  with no guardrail: an upper bound no real controller reaches.

Columns: pods (created, replacements of evicted pods included); pending p50/p95 (minutes, from a
pod's creation to its start; a pod that never started counts with the time it waited until the
trace ended or it was withdrawn); served (share of pods that started); evicted; GPUs reconfigured
(sum over changes of the GPUs each changed); changes (node relabels).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from bench.demand_traces import BUILT_IN, Trace, load
from bench.tables import percent, percentile, render_table
from migagent.autopilot.controller import Autopilot, RolloutBudgets
from migagent.autopilot.decide import Guardrails
from migagent.clock import FakeClock
from migagent.demand.generate import config_name, generate_node, generated_layout
from migagent.rollout.budget import MaxUnavailable
from migagent.rollout.reported import ReportedNode
from migagent_sim.model_node import ModelNode
from migagent_sim.model_pool import Job, ModelPool

REPO = Path(__file__).resolve().parents[1]
LAYOUTS = REPO / "configs/mig-layouts/mig-layouts.yaml"
TICK_S = 10.0
POLL_S = 60.0
POLICIES = ("static", "autopilot", "oracle")


@dataclass(frozen=True)
class Result:
    policy: str
    pods: int
    waits: tuple[float, ...]
    started: int
    evicted: int
    gpus_reconfigured: int
    changes: int
    seconds: float


class _Quiet:
    def event(self, event: str, **fields: object) -> None:
        return None

    def progress(self, *_: object) -> None:
        return None


def _pool(trace: Trace, layouts: str, reconfigure_s: float) -> ModelPool:
    nodes = [ModelNode.empty(f"gpu-{i + 1}", trace.model, trace.gpus, {"pool": "bench",
                                                                       "migagent.io/autopilot": "enabled"})
             for i in range(trace.nodes)]
    pool = ModelPool(nodes, layouts, clock=FakeClock(), reconfigure_s=reconfigure_s)
    for node in nodes:
        node.start_change(pool.layout, trace.start_layout, done_at=0.0)
        node.finish_change(0.0)
    return pool


class _Oracle:
    """Instant, free repartitioning of idle GPU instances for whatever waits (see the module docstring)."""

    def __init__(self, pool: ModelPool) -> None:
        self.pool = pool
        self.changes = 0
        self.gpus = 0
        self._fruitless: tuple[object, ...] = ()

    def step(self) -> None:
        seen = (tuple(sorted(self.pool.pending)), tuple(node.version for node in self.pool.nodes.values()))
        if not self.pool.pending or seen == self._fruitless:
            return  # nothing changed since the last look found nothing to do
        self._fruitless = seen
        waiting = sorted(self.pool.pending.values(), key=lambda item: (-item[0].priority, item[0].created))
        demand = [(r, pod.priority) for pod, _ in waiting for r, n in pod.requests.items() for _ in range(n)]
        for node in self.pool.nodes.values():
            if not demand:
                return
            pods = {gi: tuple(held) for gi, held in node.pods_by_gi().items()}
            changes = generate_node(ReportedNode(node.observation(), pods), demand)
            if not changes:
                continue
            name = config_name(changes)
            node.start_change(generated_layout(name, changes), name, done_at=self.pool.clock.wall())
            node.finish_change(self.pool.clock.wall())
            self.changes += 1
            self.gpus += len(changes)
            self.pool.schedule()
            waiting = sorted(self.pool.pending.values(), key=lambda item: (-item[0].priority, item[0].created))
            demand = [(r, pod.priority) for pod, _ in waiting for r, n in pod.requests.items() for _ in range(n)]


def replay(trace: Trace, policy: str, *, layouts: str, reconfigure_s: float = 60.0,
           guardrails: Guardrails | None = None) -> Result:
    """Replay `trace` under `policy` on a fresh model pool; every figure of one row of the table."""
    pool = _pool(trace, layouts, reconfigure_s)
    budgets = RolloutBudgets(max_unavailable=MaxUnavailable(trace.gpus))
    autopilot = Autopilot(pool, guardrails or Guardrails(), clock=pool.clock, listener=_Quiet(),
                          budgets=budgets) if policy == "autopilot" else None
    oracle = _Oracle(pool) if policy == "oracle" else None
    jobs: list[Job] = []
    withdrawn: dict[str, float] = {}
    arrivals = list(trace.arrivals)
    started_at = time.perf_counter()
    start = pool.clock.wall()
    next_poll = 0.0
    elapsed = 0.0
    while elapsed < trace.seconds:
        while arrivals and arrivals[0].at <= elapsed:
            arrival = arrivals.pop(0)
            job = Job(f"j{len(jobs)}", {arrival.resource: 1}, arrival.seconds, priority=arrival.priority,
                      patience_s=arrival.patience)
            jobs.append(job)
            pool.submit(job)
        for pod, job in list(pool.pending.values()):
            if job.patience_s is not None and pool.clock.wall() - pod.created >= job.patience_s and not job.waits:
                withdrawn[pod.name] = pool.clock.wall() - pod.created
                pool.cancel(job.name)
        if autopilot is not None and elapsed >= next_poll:
            autopilot.step()
            next_poll = elapsed + POLL_S
        if oracle is not None:
            oracle.step()
        pool.schedule()
        pool.advance(TICK_S)
        elapsed = pool.clock.wall() - start
    end = pool.clock.wall()
    waits = [w for job in jobs for w in job.waits]
    waits += list(withdrawn.values()) + [end - pod.created for pod, _ in pool.pending.values()]
    started = sum(len(job.waits) for job in jobs)
    return Result(
        policy=policy, pods=len(waits), waits=tuple(waits), started=started,
        evicted=sum(job.evictions for job in jobs),
        gpus_reconfigured=oracle.gpus if oracle is not None else pool.gpus_reconfigured,
        changes=oracle.changes if oracle is not None else len(pool.relabels),
        seconds=time.perf_counter() - started_at,
    )


def table(trace: Trace, results: Sequence[Result]) -> str:
    rows = [
        (r.policy, r.pods, f"{percentile(r.waits, 50) / 60:.1f}", f"{percentile(r.waits, 95) / 60:.1f}",
         percent(r.started / r.pods if r.pods else 1.0), r.evicted, r.gpus_reconfigured, r.changes,
         f"{r.seconds:.0f}")
        for r in results
    ]
    headers = ("policy", "pods", "pending-p50-min", "pending-p95-min", "served", "evicted", "gpus-reconfigured",
               "changes", "replay-s")
    return (f"trace {trace.name}: {trace.seconds / 3600:g} h, {len(trace.arrivals)} arrivals, {trace.nodes} nodes x"
            f" {trace.gpus} {trace.model}, start layout {trace.start_layout}\n\n{render_table(headers, rows)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.demand_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--trace", action="append", type=Path, help="a trace file (JSON); default: the built-in ones")
    parser.add_argument("--write-trace", nargs=2, metavar=("NAME", "FILE"), help="write a built-in trace and exit")
    parser.add_argument("--policies", default=",".join(POLICIES), help=f"a subset of {','.join(POLICIES)}")
    parser.add_argument("--reconfigure", type=float, default=60.0, metavar="SECONDS",
                        help="how long a relabelled node is out of service")
    parser.add_argument("--hours", type=float, help="replay only the first HOURS of each trace")
    parser.add_argument("--scale", type=int, default=1, metavar="N", help="N times the nodes and the pods")
    args = parser.parse_args(argv)
    if args.write_trace:
        name, path = args.write_trace
        Path(path).write_text(json.dumps(BUILT_IN[name]().to_json(), indent=1), encoding="utf-8")
        return 0
    logging.disable(logging.CRITICAL)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    traces = [load(path) for path in args.trace] if args.trace else [build() for build in BUILT_IN.values()]
    layouts = LAYOUTS.read_text(encoding="utf-8")
    for full in traces:
        trace = (full.first(args.hours * 3600) if args.hours else full).scaled(args.scale)
        results = [replay(trace, policy, layouts=layouts, reconfigure_s=args.reconfigure)
                   for policy in args.policies.split(",")]
        print(table(trace, results), end="\n\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
