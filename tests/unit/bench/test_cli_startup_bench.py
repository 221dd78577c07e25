"""Smoke test of the CLI start-up bench: structure only, never timings."""

from __future__ import annotations

import pytest

from bench.cli_startup import render, time_command, top_level_imports


def test_the_startup_bench_times_a_command_and_reads_what_it_imported() -> None:
    row = time_command(["-m", "migagent", "--version"], label="migagent --version", repeats=1)
    assert len(row.seconds) == len(row.cpu_seconds) == 1
    assert "kubernetes" not in row.heavy_imports
    table = render([row])
    assert "| `migagent --version` |" in table
    assert table.splitlines()[0].startswith("| command | median wall s")


@pytest.mark.parametrize("argv", [["advise", "--help"], ["autopilot", "run", "--help"]])
def test_the_demand_commands_import_the_kubernetes_client_only_to_talk_to_a_cluster(argv: list[str]) -> None:
    assert "kubernetes" not in top_level_imports(["-m", "migagent", *argv])
