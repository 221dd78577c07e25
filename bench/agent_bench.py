"""Agent bench: `python -m bench.agent_bench [--quick]`.

Figures, not assertions (see bench/README.md), all on the simulator with zero fake latencies:
(a) label -> success time for an 8-GPU H100 node, median of several runs, per transition;
(b) API requests per reconfiguration, by verb and resource, from the fake API server's log;
(c) API requests per idle minute: the agent at its default settings but one period cut short (the
    resync, then the watch stream), the counts scaled to the default periods (300 s each);
(d) RSS, CPU and API requests of an idle `migagent agent` process at its default settings (a child
    process, so the simulator's own memory and threads are not counted);
(e) API requests per change with 0, 10 and 100 pods on the node (bench.agent_scaling);
(f) label -> success for 8, 16 and 32 GPUs (bench.agent_scaling).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench.agent_scaling import pods_table, size_table
from bench.tables import Cell, render_table
from migagent.attempt.ports import AgentSettings
from migagent.node.names import CONDITION_TYPE, DESIRED_ANNOTATION, MIG_CONFIG_STATE_LABEL
from migagent.plumbing.logging import configure_logging
from migagent.sources.node_label import WatchSettings
from migagent.wiring import AgentOptions
from migagent_sim.cluster import SimCluster, SimClusterConfig
from migagent_sim.deadline import wait_until

EIGHT_H100 = SimClusterConfig(spec="8xH100-80GB-SXM", start_layout="all-1g.10gb")
TRANSITIONS = (("all-1g.10gb", "half-balanced"), ("all-1g.10gb", "all-balanced"), ("all-1g.10gb", "all-7g"))
DEFAULT_PERIOD_S = 300.0
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ChangeRun:
    seconds: float
    requests: Counter[str]
    pods_evicted: int


def _applied(cluster: SimCluster, layout: str) -> bool:
    node = cluster.node()
    labels, notes = node["metadata"].get("labels", {}), node["metadata"].get("annotations", {})
    conditions = node.get("status", {}).get("conditions", [])
    ready = any(c["type"] == CONDITION_TYPE and c["status"] == "True" for c in conditions)
    return ready and labels.get(MIG_CONFIG_STATE_LABEL) == "success" and layout in notes.get(DESIRED_ANNOTATION, "")


def _wait(cluster: SimCluster, layout: str, timeout_s: float = 120.0) -> None:
    """Until `layout` is applied; an error once `timeout_s` of an idle machine, stretched by load, passed."""
    if not wait_until(lambda: _applied(cluster, layout), timeout_s, poll_s=0.002):
        raise RuntimeError(f"{layout} was not applied within {timeout_s:g}s (times the load factor)")


def _requests(cluster: SimCluster, since: int) -> Counter[str]:
    return Counter(
        f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}" for r in cluster.api.requests[since:]
    )


def run_change(workdir: Path, start: str, target: str) -> ChangeRun:
    """One fresh node in `start` with three workload pods (one per changed GPU type), relabelled to `target`."""
    with SimCluster(workdir, replace(EIGHT_H100, start_layout=start)) as cluster:
        for name, gpu, slot in (("a", 0, 4), ("b", 3, 6), ("c", 6, 2)):
            cluster.kubelet.run_workload("bench", name, mig_uuid=cluster.mig_uuid(gpu, slot))
        running = cluster.start_agent()
        _wait(cluster, start)
        since = len(cluster.api.requests)
        started = time.perf_counter()
        cluster.label(target)
        _wait(cluster, target)
        seconds = time.perf_counter() - started
        requests = _requests(cluster, since)
        running.stop()
        return ChangeRun(seconds, requests, requests["create pods/eviction"])


def change_table(runs: int, workdir: Path) -> tuple[str, Counter[str]]:
    rows: list[list[Cell]] = []
    per_change: Counter[str] = Counter()
    for start, target in TRANSITIONS:
        results = [run_change(workdir / f"{target}-{i}", start, target) for i in range(runs)]
        seconds = [r.seconds for r in results]
        rows.append([
            f"{start} -> {target}",
            runs,
            statistics.median(seconds),
            min(seconds),
            max(seconds),
            int(statistics.median(sum(r.requests.values()) for r in results)),
            results[0].pods_evicted,
        ])
        if target == "half-balanced":
            per_change = results[0].requests
    headers = ["transition (8x H100)", "runs", "median-s", "min-s", "max-s", "api-requests", "evictions"]
    return render_table(headers, rows), per_change


def request_table(counts: Counter[str]) -> str:
    rows: list[list[Cell]] = [[what, n] for what, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
    rows.append(["total", sum(counts.values())])
    return render_table(["request (all-1g.10gb -> half-balanced)", "count"], rows)


def _idle_requests(workdir: Path, *, resync_s: float, watch_timeout_s: float, window_s: float) -> Counter[str]:
    config = replace(EIGHT_H100, watch_timeout_s=watch_timeout_s)
    with SimCluster(workdir, config) as cluster:
        base = cluster.options()
        # The agent's defaults (its Lease, its settings) but for the one period cut short; a stream that
        # ran its full (short) timeout counts as healthy, so no back-off slows the cycle.
        defaults = AgentOptions(node_name=base.node_name, settings=AgentSettings(config_file=cluster.layout_file))
        watch = WatchSettings(
            resync_period_s=resync_s, watch_timeout_s=watch_timeout_s, healthy_stream_s=watch_timeout_s / 2
        )
        options = replace(
            defaults, podresources_socket=base.podresources_socket, watch=watch,
            settings=replace(defaults.settings, resync_period_s=resync_s),
        )
        running = cluster.start_agent(options)
        _wait(cluster, "all-1g.10gb")
        time.sleep(0.5)  # let the first report settle
        since = len(cluster.api.requests)
        time.sleep(window_s)
        counts = _requests(cluster, since)
        running.stop()
        return counts


def idle_table(workdir: Path, window_s: float) -> str:
    resync_s, watch_s = 0.5, 1.0
    per_resync = _idle_requests(workdir / "resync", resync_s=resync_s, watch_timeout_s=3600.0, window_s=window_s)
    per_watch = _idle_requests(workdir / "watch", resync_s=3600.0, watch_timeout_s=watch_s, window_s=window_s)
    resync_cost = sum(per_resync.values()) / (window_s / resync_s)
    watch_cost = sum(per_watch.values()) / (window_s / watch_s)
    per_minute = (resync_cost + watch_cost) * 60.0 / DEFAULT_PERIOD_S
    seen_resync = ", ".join(f"{n} {w}" for w, n in per_resync.items())
    seen_watch = ", ".join(f"{n} {w}" for w, n in per_watch.items())
    rows = [
        ["per resync tick", f"{resync_cost:.2f}", seen_resync or "none"],
        ["per watch cycle (stream end + next watch)", f"{watch_cost:.2f}", seen_watch or "none"],
        ["per idle minute at defaults (300 s / 300 s)", f"{per_minute:.2f}", "(resync + watch) x 60 / 300"],
    ]
    note = (
        f"the agent at its default settings (Lease 30 s) over {window_s:g} s windows: resync every {resync_s:g} s"
        f" (watch open all along), then watch streams ending every {watch_s:g} s (no resync); each figure is"
        " requests divided by ticks or cycles; the simulated kubelet and device plugin make no request"
    )
    return render_table(["idle cost", "requests", "seen"], rows) + "\n" + note


def _proc_figures(pid: int) -> tuple[float, int]:
    """(CPU seconds so far, resident bytes) of process `pid` from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime (fields 14, 15 of stat)
    rss_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return cpu, rss_pages * _PAGE


def agent_process_table(workdir: Path, window_s: float) -> str:
    """Start `migagent agent` as a child against the simulated cluster; measure it while idle."""
    with SimCluster(workdir, EIGHT_H100) as cluster:
        state = workdir / "gpus.json"
        cluster.fake.save(state)  # the child's own simulated GPUs, in the same layout
        command = [
            sys.executable, "-m", "migagent", "agent",
            "--node-name", cluster.config.node_name,
            "--config-file", str(cluster.layout_file),
            "--api-server", cluster.api.url,
            "--podresources-socket", cluster.socket_path,
            "--journal-dir", str(workdir / "journal"),
            "--state", str(state),
        ]
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait(cluster, "all-1g.10gb", timeout_s=60.0)
            time.sleep(1.0)
            cpu_before, _ = _proc_figures(child.pid)
            since = len(cluster.api.requests)
            time.sleep(window_s)
            cpu_after, rss = _proc_figures(child.pid)
            requests = len(cluster.api.requests) - since
        finally:
            child.terminate()
            child.wait(timeout=30)
    rows = [
        ["RSS while idle", f"{rss / 2**20:.1f} MiB"],
        ["CPU while idle", f"{100 * (cpu_after - cpu_before) / window_s:.2f} % of one core (10 ms ticks)"],
        [f"API requests in {window_s:g} s idle", str(requests)],
        ["exit on SIGTERM", str(child.returncode)],
    ]
    return render_table(["agent process (8x H100 simulated, default settings)", "figure"], rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agent_bench")
    parser.add_argument("--quick", action="store_true", help="one run per transition and short idle windows")
    args = parser.parse_args(argv)
    configure_logging(json_logs=False, level=logging.WARNING)
    for name in ("urllib3.connectionpool", "kubernetes.client.rest"):
        logging.getLogger(name).setLevel(logging.ERROR)
    runs, window = (1, 2.0) if args.quick else (5, 10.0)
    process_window = 5.0 if args.quick else 60.0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="agent-bench-") as tmp:
        workdir = Path(tmp)
        changes, per_change = change_table(runs, workdir / "changes")
        print("(a) Label -> success on the simulator (zero fake latencies)")
        print(changes)
        print("\n(b) API requests for one reconfiguration")
        print(request_table(per_change))
        print("\n(c) API requests while idle")
        print(idle_table(workdir / "idle", window))
        print("\n(d) The agent process")
        print(agent_process_table(workdir / "process", process_window))
        print("\n(e) API requests per change by pods on the node")
        print(pods_table(workdir / "pods"))
        print("\n(f) Label -> success by node size")
        print(size_table(workdir / "sizes", max(1, runs // 2 + 1)))
    print(f"\ntotal {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
