"""Planner bench: `python -m bench.planner_bench [--quick] [--models KEY,...]`.

Prints two plain-text tables (figures, not assertions; see bench/README.md for every column):
(a) per catalog model, the share of fitting GI multisets each way of building a GPU realises,
    and the planner's time per plan;
(b) a suite of transitions on 8-GPU nodes: GIs destroyed and GPUs reset by our plan, by
    mig-parted's whole-GPU rebuild, and the lower bound.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence

from bench.catalog_bench import FULL, QUICK, CatalogSettings, ModelRow, bench_model
from bench.tables import Cell, percent, percentile, render_table
from bench.transitions import SUITE, TransitionRow, run_suite
from migagent.catalog import GpuModel, all_models, model_by_key

_MS = 1000.0
_REBUILD_NOTE = """\
rebuild = mig-parted apply: when any selected GPU's mode differs, every selected GPU with MIG on is
cleared first (apply/mode.go) and, if an Ampere mode is left pending, every GPU of the node is reset;
then every GPU whose MIG-device counts differ is cleared and rebuilt. bound: see bench/README.md."""


def catalog_table(rows: Sequence[ModelRow]) -> str:
    headers = [
        "model",
        "arch",
        "multisets",
        "ours",
        "nvml-1st",
        "nvml-1st-alt",
        "nvml-perm",
        "mean-tries",
        "max-tries",
        "capped",
        "lowest-1st",
        "plan-p50-ms",
        "plan-p99-ms",
    ]
    body: list[list[Cell]] = [
        [
            row.model,
            row.architecture,
            row.multisets,
            percent(row.share(row.ours)),
            percent(row.share(row.nvml_first)),
            percent(row.share(row.nvml_first_small)),
            percent(row.share(row.nvml_retry)),
            statistics.fmean(row.retry_tries) if row.retry_tries else 0.0,
            max(row.retry_tries, default=0),
            row.retry_capped,
            percent(row.share(row.lowest_start_first)),
            _MS * percentile(row.plan_seconds, 50),
            _MS * percentile(row.plan_seconds, 99),
        ]
        for row in rows
    ]
    return render_table(headers, body)


def misses_text(rows: Sequence[ModelRow]) -> str:
    """The multisets one NVML attempt misses, for the first model of each architecture."""
    lines: list[str] = []
    seen: set[str] = set()
    for row in rows:
        if row.architecture in seen:
            continue
        seen.add(row.architecture)
        lines.append(f"{row.model}: {len(row.first_attempt_misses)} missed by one NVML attempt")
        lines.extend(f"  {miss}" for miss in row.first_attempt_misses)
    return "\n".join(lines)


def transition_table(rows: Sequence[TransitionRow]) -> str:
    headers = [
        "transition",
        "ours-destroy",
        "ours-reset",
        "rebuild-destroy",
        "rebuild-reset",
        "bound-destroy",
        "bound-reset",
        "at-bound",
        "verified",
        "plan-p50-ms",
    ]
    body: list[list[Cell]] = [
        [
            row.name,
            row.ours_destroys,
            row.ours_resets,
            row.rebuild_destroys,
            row.rebuild_resets,
            row.bound_destroys,
            row.bound_resets,
            "yes" if row.ours_at_bound else "NO",
            "yes" if row.verified else "NO",
            _MS * percentile(row.plan_seconds, 50),
        ]
        for row in rows
    ]
    return render_table(headers, body)


def _models(keys: str | None) -> tuple[GpuModel, ...]:
    if keys is None:
        return all_models()
    return tuple(model_by_key(key.strip()) for key in keys.split(",") if key.strip())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.planner_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timing repeats (well under a minute)")
    parser.add_argument("--models", metavar="KEY,...", help="catalog models for table (a); default: all")
    args = parser.parse_args(argv)
    settings: CatalogSettings = QUICK if args.quick else FULL
    started = time.perf_counter()
    print(f"migagent planner bench ({'quick' if args.quick else 'full'}; python {sys.version.split()[0]})")
    print()
    print("(a) GI multisets that fit an empty GPU, realised per approach")
    rows = [bench_model(model, settings) for model in _models(args.models)]
    print(catalog_table(rows))
    print()
    print(misses_text(rows))
    print()
    print("(b) Transitions on 8-GPU nodes: GIs destroyed / GPUs reset")
    print(transition_table(run_suite(SUITE, plan_repeats=settings.plan_repeats)))
    print(_REBUILD_NOTE)
    print()
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
