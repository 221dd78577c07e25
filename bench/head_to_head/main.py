"""`python -m bench.head_to_head`: run every scenario for both managers and print (or --write) the tables.

    python -m bench.head_to_head --quick           # one run per scenario and manager
    python -m bench.head_to_head --write           # 3 runs each; bench/README.md's block and README's summary
    python -m bench.head_to_head --scenarios pods,typo-then-fix --managers migagent --repeats 2

The real control plane is started once; every run gets a fresh node. Runs are interleaved (each repeat
goes through every scenario for every manager) so machine load falls on both alike.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.head_to_head.binaries import gpu_host, missing
from bench.head_to_head.managers import (
    DrainedMigManager,
    GpuHost,
    Manager,
    Migagent,
    NvidiaMigManager,
    nvml_client_start_s,
)
from bench.head_to_head.node import NODE, write_start_node
from bench.head_to_head.publish import publish, render
from bench.head_to_head.run import RunContext, RunRecord
from bench.head_to_head.scenarios import SCENARIOS, Settings
from migagent.plumbing.logging import configure_logging
from migagent_sim.cluster_config import SimClusterConfig
from tests.realkube.control_plane import ControlPlane, binaries_dir, new_workdir
from tests.realkube.deployment import Deployer

MANAGERS = ("migagent", "mig-manager", "mig-manager+drain")
DRAIN_TIMEOUT_S = 30.0
"""migagent's --drain-timeout here (its default is 300 s): how long `pdb-for-ever` waits before failing."""


def make_managers(host: GpuHost, names: Sequence[str], *, deployer: Deployer | None = None) -> list[Manager]:
    """`deployer`: the one that tracks deploy/'s variant on this control plane (a new one by default)."""
    known: dict[str, Manager] = {
        "migagent": Migagent(host, drain_timeout_s=DRAIN_TIMEOUT_S, deployer=deployer),
        "mig-manager": NvidiaMigManager(host),
        "mig-manager+drain": DrainedMigManager(host, drain_timeout_s=DRAIN_TIMEOUT_S),
    }
    return [known[name] for name in names]


def run_one(
    plane: ControlPlane,
    manager: Manager,
    scenario: str,
    *,
    workdir: Path,
    node: SimClusterConfig,
    settings: Settings,
    inspect: Callable[[RunContext, RunRecord], None] | None = None,
) -> RunRecord:
    """One run on a fresh node; `inspect` sees the node and the record before the run is torn down."""
    ctx = RunContext(plane, manager, node, workdir)
    try:
        ctx.start_manager()
        ctx.ready()
        outcome = SCENARIOS[scenario](ctx, settings)
        ctx.finish()
        record = ctx.record(scenario, outcome)
        if inspect is not None:
            inspect(ctx, record)
        return record
    finally:
        ctx.close()


def run_all(
    plane: ControlPlane,
    managers: Sequence[Manager],
    scenarios: Sequence[str],
    *,
    repeats: int,
    workdir: Path,
    node: SimClusterConfig | None = None,
    settings: Settings | None = None,
    progress: bool = True,
) -> list[RunRecord]:
    for manager in managers:
        manager.install(plane)
    records = []
    for repeat in range(repeats):
        for scenario in scenarios:
            for manager in managers:
                started = time.monotonic()
                record = run_one(
                    plane, manager, scenario, workdir=workdir / f"{repeat}-{scenario}-{manager.name}",
                    node=node or NODE, settings=settings or Settings(),
                )  # fmt: skip
                records.append(record)
                if progress:
                    print(
                        f"run {repeat + 1}/{repeats} {scenario} {manager.name}: {record.final_state}"
                        f" ({time.monotonic() - started:.0f}s)",
                        file=sys.stderr,
                    )
    return records


def simulator_start_cost(host: GpuHost, workdir: Path) -> float:
    """What one nvidia-mig-parted run costs here for starting the simulator (see nvml_client_start_s)."""
    settings = NODE
    workdir.mkdir(parents=True, exist_ok=True)
    layouts = workdir / "mig-layouts.yaml"
    layouts.write_text(settings.layouts_yaml, encoding="utf-8")
    return nvml_client_start_s(host, write_start_node(settings, layouts, workdir / "node.json"))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.head_to_head", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run per scenario and manager")
    parser.add_argument("--repeats", type=int, default=3, help="runs per scenario and manager (default 3)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated (default: all)")
    parser.add_argument("--managers", default=",".join(MANAGERS), help="comma-separated (default: all)")
    parser.add_argument("--write", action="store_true", help="write bench/README.md's block and README's summary")
    parser.add_argument("--keep", action="store_true", help="keep the run directories (manager logs) and say where")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    scenarios = args.scenarios.split(",")
    names = args.managers.split(",")
    unknown = sorted(set(scenarios) - set(SCENARIOS)) + sorted(set(names) - set(MANAGERS))
    if unknown:
        print(f"unknown scenario or manager: {', '.join(unknown)}", file=sys.stderr)
        return 2
    absent = missing()
    if absent:
        print(f"head_to_head: {absent}", file=sys.stderr)
        return 1
    repeats = 1 if args.quick else args.repeats
    configure_logging(json_logs=False, level=logging.WARNING)  # the managers' logs go to their own files
    scratch = Path(tempfile.mkdtemp(prefix="migagent-h2h-"))
    plane = ControlPlane(binaries_dir(), new_workdir()).start()
    started = time.monotonic()
    try:
        host = gpu_host()
        managers = make_managers(host, names)
        records = run_all(plane, managers, scenarios, repeats=repeats, workdir=scratch / "runs")
        start_cost_s = simulator_start_cost(host, scratch / "start-cost")
    finally:
        plane.stop()
        shutil.rmtree(plane.workdir, ignore_errors=True)
        if args.keep:
            print(f"run directories kept in {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    given = list(sys.argv[1:] if argv is None else argv)
    command = " ".join(["python -m bench.head_to_head", *given]) + ("" if args.quick else f" (repeats {repeats})")
    text = render(
        records, names, command=command, elapsed_s=time.monotonic() - started, drain_timeout_s=DRAIN_TIMEOUT_S,
        start_cost_s=start_cost_s,
    )  # fmt: skip
    print(text)
    if args.write:
        publish(records, names, text)
    return 0
