"""Print the judge's matrix: per config source and GPU model, how many (config, model) pairs pass
each check of tests/judge/batch.py, and every disagreement.

    python -m tests.judge.matrix     (as root; scripts/nvidia_tools.sh built; a few minutes)
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor

from migagent_sim.gpu_node.library import library_dir
from migagent_sim.gpu_node.nvidia_tools import missing_tools, tools_dir
from tests.judge.batch import CHECKS, SOURCES, judge_model
from tests.judge.cases import judged_models


def main() -> int:
    problem = missing_tools()
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    started = time.monotonic()
    keys = [(source, model) for source in SOURCES for model in judged_models()]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda key: judge_model(key[0], key[1], tools_dir(), library_dir()), keys))
    print(f"{'source':15} {'model':20} {'pairs':>5}  " + "  ".join(f"{c:>34}" for c in CHECKS))
    totals = [0, 0, 0, 0]
    for (source, model), verdicts in zip(keys, results, strict=True):
        counts = [len(verdicts.pairs), *(verdicts.passed(check) for check in CHECKS)]
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        print(f"{source:15} {model.key:20} {counts[0]:5}  " + "  ".join(f"{n:34}" for n in counts[1:]))
    print(f"{'all':36} {totals[0]:5}  " + "  ".join(f"{n:34}" for n in totals[1:]))
    for verdicts in results:
        for line in verdicts.lines():
            print(f"disagreement: {line}")
    print(f"judged in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
