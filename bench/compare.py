"""Compare two commits on this machine: `python -m bench.compare OTHER [--runs N] [--probe PROBE]`.

A checkout of OTHER is made with `git worktree add` (removed afterwards); then the same probe
(bench/compare_probe.py, from this tree) runs as a fresh process against each tree in turn,
alternating which goes first, so both see the same load over time. Prints per tree the median,
min and max of the probe's figure (seconds; MiB for `idle`) and the median API requests, and the
ratio of the medians. On a shared machine, run enough rounds for the medians to settle and say how
loaded it was. Each tree runs with its own `migagent` and, where it has one, its own `simulator/`
on PYTHONPATH; which commits the probe can drive is said in bench/compare_probe.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.tables import Cell, render_table

HERE = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).with_name("compare_probe.py")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(HERE), *args], check=True, capture_output=True, text=True).stdout.strip()


def probe(tree: Path, probe_args: Sequence[str]) -> dict[str, Any]:
    paths = [tree, tree / "simulator"] if (tree / "simulator").is_dir() else [tree]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(path) for path in paths)}
    done = subprocess.run(
        [sys.executable, str(PROBE), *probe_args], cwd=tree, env=env, capture_output=True, text=True, timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"probe in {tree} failed: {done.stderr.strip()[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(figures["migagent"]).resolve() != (tree / "migagent").resolve():
        raise RuntimeError(f"the probe for {tree} imported migagent from {figures['migagent']}")
    return figures


def compare(other: str, *, runs: int, probe_args: Sequence[str]) -> str:
    head = _git("rev-parse", "--short", "HEAD")
    other_commit = _git("rev-parse", "--short", other)
    dirty = " (+ uncommitted changes)" if _git("status", "--porcelain", "--untracked-files=no") else ""
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        checkout = Path(tmp) / other_commit
        _git("worktree", "add", "--detach", str(checkout), other_commit)
        try:
            trees = {f"{head}{dirty} (this tree)": HERE, f"{other_commit} ({other})": checkout}
            results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
            for round_ in range(runs):
                order = list(trees.items()) if round_ % 2 == 0 else list(reversed(trees.items()))
                for name, tree in order:
                    results[name].append(probe(tree, probe_args))
        finally:
            _git("worktree", "remove", "--force", str(checkout))
    return _table(results, runs=runs, probe_args=probe_args)


def _table(results: dict[str, list[dict[str, Any]]], *, runs: int, probe_args: Sequence[str]) -> str:
    rows: list[list[Cell]] = []
    medians = []
    unit = "s"
    timed = all("wall_s" in f for figures in results.values() for f in figures)  # the demo probe: wall and outcome
    for name, figures in results.items():
        values = [f["value"] for f in figures]
        unit = figures[0]["unit"]
        medians.append(statistics.median(values))
        rows.append([name, runs, medians[-1], min(values), max(values),
                     int(statistics.median(f["requests"] for f in figures))])
        if timed:
            rows[-1][-1:] = [statistics.median(f["wall_s"] for f in figures), sum(f["failed"] for f in figures)]
    headers = [f"probe: {' '.join(probe_args)}", "runs", f"median-{unit}", f"min-{unit}", f"max-{unit}",
               *(("median-wall-s", "failed-runs") if timed else ("api-requests",))]
    ratio = medians[0] / medians[1] if medians[1] else float("nan")
    load = os.getloadavg()[0]
    return render_table(headers, rows) + f"\nthis tree / other: {ratio:.2f} of the median; load average now {load:.1f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.splitlines()[0])
    parser.add_argument("other", help="the commit to compare this tree with (any git revision)")
    parser.add_argument("--runs", type=int, default=5, help="rounds; each runs both trees once (default 5)")
    parser.add_argument("--probe", choices=("change", "journal", "version", "idle", "demo"), default="change")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--pods", type=int, default=0, help="pods on the node for the change probe")
    parser.add_argument("--target", default="all-balanced", help="layout the change probe labels (from all-1g.10gb)")
    parser.add_argument("--window", type=float, default=30.0, help="seconds the idle probe counts requests")
    args = parser.parse_args(argv)
    probe_args = {
        "change": ["change", str(args.gpus), str(args.pods), args.target],
        "journal": ["journal", str(args.gpus)],
        "version": ["version"],
        "idle": ["idle", f"{args.window:g}"],
        "demo": ["demo"],
    }[args.probe]
    print(compare(args.other, runs=args.runs, probe_args=probe_args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
