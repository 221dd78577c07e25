"""How the agent's cost grows: API requests per change with 0, 10 and 100 pods on the node, and label ->
success for 8, 16 and 32 GPUs (tables (e) and (f) of `python -m bench.agent_bench`).

Requests that grow with the pods a change moves are the evictions and one Event per evicted pod;
everything else (polls of the drain, of the operator's pods, of the advertisement) must not.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from bench.tables import Cell, render_table
from migagent_sim.cluster import SimCluster, SimClusterConfig

POD_COUNTS = (0, 10, 100)
GPU_COUNTS = (8, 16, 32)
_BASE = SimClusterConfig(spec="8xH100-80GB-SXM", start_layout="all-1g.10gb")


def _wait_applied(cluster: SimCluster, layout: str) -> None:
    from bench.agent_bench import _wait  # one definition of "applied" for every table (imported late: a cycle)

    _wait(cluster, layout, timeout_s=180.0)


def measure_change(workdir: Path, *, gpus: int, pods: int, target: str = "all-balanced") -> tuple[float, Counter[str]]:
    """(label -> success seconds, requests by kind) for one change of a fresh node with `pods` pods spread
    over its 1g GPU instances (round robin; more pods than instances share them)."""
    config = replace(_BASE, spec=f"{gpus}xH100-80GB-SXM")
    with SimCluster(workdir, config) as cluster:
        for i in range(pods):
            gpu, slot = divmod(i % (gpus * 7), 7)
            cluster.kubelet.run_workload("bench", f"w{i}", mig_uuid=cluster.mig_uuid(gpu, slot))
        running = cluster.start_agent()
        _wait_applied(cluster, "all-1g.10gb")
        since = len(cluster.api.requests)
        started = time.perf_counter()
        cluster.label(target)
        _wait_applied(cluster, target)
        seconds = time.perf_counter() - started
        requests = Counter(
            f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"
            for r in cluster.api.requests[since:]
        )
        running.stop()
        return seconds, requests


def pods_table(workdir: Path) -> str:
    rows: list[list[Cell]] = []
    for pods in POD_COUNTS:
        seconds, requests = measure_change(workdir / f"pods-{pods}", gpus=8, pods=pods)
        evictions = requests["create pods/eviction"]
        rows.append([
            f"{pods} pods", sum(requests.values()), evictions, requests["create events"], requests["list pods"],
            requests["get nodes"], seconds,
        ])
    headers = ["8x H100 all-1g.10gb -> all-balanced", "requests", "evictions", "events", "list-pods", "get-nodes",
               "seconds"]
    note = "pods spread round robin over the 56 1g GIs; the planner keeps the GIs it can, the rest of the pods move"
    return render_table(headers, rows) + "\n" + note


def size_table(workdir: Path, runs: int) -> str:
    rows: list[list[Cell]] = []
    base: float | None = None
    for gpus in GPU_COUNTS:
        results = [measure_change(workdir / f"gpus-{gpus}-{i}", gpus=gpus, pods=0) for i in range(runs)]
        seconds = [s for s, _ in results]
        median = statistics.median(seconds)
        base = base or median / gpus
        rows.append([
            f"{gpus}x H100", runs, median, min(seconds), max(seconds),
            int(statistics.median(sum(r.values()) for _, r in results)), f"{median / (base * gpus):.2f}",
        ])
    headers = ["all-1g.10gb -> all-balanced, no pods", "runs", "median-s", "min-s", "max-s", "api-requests",
               "per-gpu-vs-8"]
    note = "per-gpu-vs-8: median seconds per GPU relative to the 8-GPU node (1.00 = linear)"
    return render_table(headers, rows) + "\n" + note
