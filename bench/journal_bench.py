"""Journal bench: `python -m bench.journal_bench [--gpus 8,16,32]`.

What the write-ahead journal costs an apply, per node size: FakeNvml H100 nodes in `all-1g.10gb`
changed to `all-balanced` (every GPU changes) by the real ApplyEngine with a FileJournal in a
temporary directory, each journal save timed. Figures, not assertions: the journal's cost must grow
linearly with the steps (the plan is written once per attempt, a step is one appended line).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.tables import Cell, render_table
from migagent.clock import FakeClock
from migagent.layout.parse import parse_layout
from migagent.layout.resolve import identity_of, resolve_config
from migagent.nvml.driver import GpuDriver
from migagent.plumbing.logging import configure_logging
from migagent.reconcile.bootid import FixedBootId
from migagent.reconcile.journal import FileJournal, JournalRecord, desired_node_hash
from migagent.reconcile.machine import ApplyEngine
from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.reset import SimResetRunner
from migagent_sim.doubles.layouts import ALL_1G_AND_BALANCED

LAYOUTS = ALL_1G_AND_BALANCED


class TimedJournal(FileJournal):
    """A FileJournal that adds up the time its saves take."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.saves = 0
        self.seconds = 0.0

    def save(self, record: JournalRecord) -> None:
        started = time.perf_counter()
        super().save(record)
        self.seconds += time.perf_counter() - started
        self.saves += 1


@dataclass(frozen=True)
class JournalRun:
    gpus: int
    steps: int
    saves: int
    journal_s: float
    apply_s: float
    bytes_on_disk: int


def _apply(driver: GpuDriver, engine: ApplyEngine, config: str) -> int:
    layout = parse_layout(LAYOUTS, source="bench")
    desired = resolve_config(layout, config, [identity_of(gpu) for gpu in driver.observe().gpus])
    result = engine.apply(desired, layout_hash=desired_node_hash(desired), config_name=config)
    if not result.converged:
        raise RuntimeError(f"{config}: {result.error}")
    return len(result.steps_run)


def run_journal(gpus: int, workdir: Path) -> JournalRun:
    fake = FakeNvml.from_spec(f"{gpus}xH100-80GB-SXM", mig_enabled=True)
    with GpuDriver(fake, reset_runner=SimResetRunner(fake)) as driver:
        boot = FixedBootId()
        _apply(driver, ApplyEngine(driver, TimedJournal(workdir / "warm"), clock=FakeClock(), boot_id_provider=boot),
               "all-1g.10gb")
        journal = TimedJournal(workdir / "journal")
        engine = ApplyEngine(driver, journal, clock=FakeClock(), boot_id_provider=boot)
        started = time.perf_counter()
        steps = _apply(driver, engine, "all-balanced")
        apply_s = time.perf_counter() - started
    size = sum(p.stat().st_size for p in (workdir / "journal").iterdir())
    return JournalRun(gpus, steps, journal.saves, journal.seconds, apply_s, size)


def journal_table(runs: Sequence[JournalRun]) -> str:
    rows: list[list[Cell]] = [
        [f"{r.gpus}x H100 all-1g.10gb -> all-balanced", r.steps, r.saves, r.journal_s, 1000 * r.journal_s / r.saves,
         r.apply_s, r.bytes_on_disk]
        for r in runs
    ]
    headers = ["change", "steps", "saves", "journal-s", "ms-per-save", "apply-s", "journal-bytes"]
    return render_table(headers, rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.journal_bench")
    parser.add_argument("--gpus", default="8,16,32", help="node sizes, comma-separated (default 8,16,32)")
    args = parser.parse_args(argv)
    configure_logging(json_logs=False, level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="journal-bench-") as tmp:
        runs = [run_journal(int(n), Path(tmp) / n) for n in args.gpus.split(",")]
    print("Journal cost of one apply (FileJournal on this machine's disk, each save fsynced)")
    print(journal_table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
