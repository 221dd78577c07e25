"""Print the judge's matrix: per config source and GPU model, how many (config, model) pairs pass
each check of tests/judge/batch.py, and every disagreement.

    python -m tests.judge.matrix     (as root; scripts/nvidia_tools.sh built; a few minutes)
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor

from migagent_sim.gpu_node.library import library_dir
from migagent_sim.gpu_node.nvidia_tools import missing_tools, tools_dir, versions
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
        release = versions()[0]
        results = list(pool.map(lambda key: judge_model(key[0], key[1], tools_dir(), library_dir(), release), keys))
    heads = ("pairs", "beyond mig-parted", *CHECKS)
    print(f"{'source':15} {'model':18} " + " ".join(f"{h:>{max(6, len(h))}}" for h in heads))
    totals = [0] * len(heads)
    for (source, model), verdicts in zip(keys, results, strict=True):
        counts = [len(verdicts.pairs), len(verdicts.beyond), *(verdicts.passed(check) for check in CHECKS)]
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        print(
            f"{source:15} {model.key:18} "
            + " ".join(f"{n:>{max(6, len(h))}}" for n, h in zip(counts, heads, strict=True))
        )
    print(f"{'all':34} " + " ".join(f"{n:>{max(6, len(h))}}" for n, h in zip(totals, heads, strict=True)))
    for verdicts in results:
        for index in sorted(verdicts.beyond):
            print(f"beyond mig-parted {release}: {verdicts.pairs[index].label}")
        for line in verdicts.lines():
            print(f"disagreement: {line}")
    print(f"judged in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
