"""The agent bench's measurement runs and counts what it claims (figures are never asserted)."""

from __future__ import annotations

from pathlib import Path

from bench.agent_bench import request_table, run_change


def test_one_bench_reconfiguration_counts_its_evictions_and_requests(tmp_path: Path) -> None:
    run = run_change(tmp_path, "all-1g.10gb", "half-balanced")
    # Of the three bench pods, those on GPU 0 slot 4 and GPU 3 slot 6 sit on destroyed GIs; GPU 6 is untouched.
    assert run.pods_evicted == 2
    assert run.requests["patch nodes/status"] >= 2
    table = request_table(run.requests)
    assert table.splitlines()[-1].split()[-1] == str(sum(run.requests.values()))
