"""Smoke test of the CLI start-up bench: structure only, never timings."""

from __future__ import annotations

from bench.cli_startup import render, time_command


def test_the_startup_bench_times_a_command_and_reads_what_it_imported() -> None:
    row = time_command(["-m", "migagent", "--version"], label="migagent --version", repeats=1)
    assert len(row.seconds) == len(row.cpu_seconds) == 1
    assert "kubernetes" not in row.heavy_imports
    table = render([row])
    assert "| `migagent --version` |" in table
    assert table.splitlines()[0].startswith("| command | median wall s")
