"""Advice at fleet scale: CPU seconds of one `advise` from 16 to 5,000 nodes, 12.5 pending pods per node.

    python -m bench.advise_scaling                    # the table docs/demand.md shows
    python -m bench.advise_scaling --sizes 16,1000    # some sizes
    python -m bench.advise_scaling --one 1000         # one size, as JSON (what each row runs)

Pools are bench/demand_pools.py's (`fleet`): H100 and A100 nodes whose agents report as the agent does,
30-90% of their GPU instances busy, the pods that fit bound as the scheduler would, and 12.5 pods per
node that fit nowhere left pending. Each size runs in a fresh process, so no memory of an earlier size
helps it; the time is the CPU (user + system) of `advise` alone, the pool built beforehand. Columns:
`one device` when every pending pod asks one MIG device; `1% two` when one pending pod in a hundred asks
two of one profile (each change that serves such a pod can raise what other nodes' changes are worth,
so they are priced again: see migagent/demand/advise.py); `oracle`, the search before issue 35 (kept
in tests/unit/demand/oracle.py), on the sizes it finishes in minutes. Then what the advice does with
one device per pod: nodes changed, pods they serve, pods evicted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZES = (16, 32, 64, 128, 256, 512, 1000, 2000, 5000)
ORACLE_UP_TO = 128


def one(nodes: int, *, multi: float, oracle: bool) -> dict[str, float]:
    """Build the pool, then time one advice (in this process)."""
    from bench.demand_pools import fleet  # the child's import, not the parent's
    from migagent.demand.advise import advise

    view = fleet(nodes, multi=multi)
    search = advise
    if oracle:
        sys.path.insert(0, str(REPO))
        from tests.unit.demand.oracle import oracle_advise

        search = oracle_advise
    started = time.process_time()
    advice = search(view)
    seconds = time.process_time() - started
    totals = advice.totals()
    return {"seconds": seconds, "pending": totals["pending"], "changed": totals["nodes_changed"],
            "served": totals["served_after_changes"], "evicted": totals["pods_evicted"]}


def measured(nodes: int, *, multi: float = 0.0, oracle: bool = False) -> dict[str, float]:
    argv = [sys.executable, "-m", "bench.advise_scaling", "--one", str(nodes), "--multi", str(multi)]
    done = subprocess.run([*argv, *(["--oracle"] if oracle else [])], cwd=REPO, capture_output=True, text=True,
                          check=True)
    result: dict[str, float] = json.loads(done.stdout)
    return result


def table(sizes: Sequence[int]) -> str:
    lines = ["| nodes | pending pods | CPU s, one device | CPU s, 1% two | CPU s, oracle | nodes changed |"
             " pods served by changes | pods evicted |", "|---|---|---|---|---|---|---|---|"]
    for nodes in sizes:
        plain, two = measured(nodes), measured(nodes, multi=0.01)
        oracle = f"{measured(nodes, oracle=True)['seconds']:.2f}" if nodes <= ORACLE_UP_TO else "-"
        lines.append(f"| {nodes} | {plain['pending']:.0f} | {plain['seconds']:.2f} | {two['seconds']:.2f} | {oracle} |"
                     f" {plain['changed']:.0f} | {plain['served']:.0f} | {plain['evicted']:.0f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.advise_scaling", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="node counts, comma-separated")
    parser.add_argument("--one", type=int, metavar="NODES", help="time one size here; print JSON")
    parser.add_argument("--multi", type=float, default=0.0, help="with --one: share of pods asking two devices")
    parser.add_argument("--oracle", action="store_true", help="with --one: time the search before issue 35")
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(args.one, multi=args.multi, oracle=args.oracle)))
        return 0
    print(table([int(size) for size in args.sizes.split(",")]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
