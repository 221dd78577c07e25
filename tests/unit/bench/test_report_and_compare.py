"""bench.report puts a bench's own stdout between a block's markers (never typed figures), and
bench.compare's table shows both trees' medians; structure only, no timing is asserted."""

from __future__ import annotations

from typing import Any

import pytest

from bench.compare import _table
from bench.report import BLOCKS, Block, _begin, regenerate

README = """# Some bench

prose stays
<!-- bench:demo begin -->
old figures
<!-- bench:demo end -->
more prose
"""


def test_a_block_is_replaced_by_the_bench_output_and_the_prose_around_it_is_kept() -> None:
    block = Block("demo", ("-c", "print('figure 1.23')"))
    text, missing = regenerate(README, [block], base=None)
    assert missing == []
    assert "old figures" not in text
    assert "```\nfigure 1.23\n```" in text
    assert text.startswith("# Some bench\n\nprose stays\n<!-- bench:demo begin")
    assert text.endswith("<!-- bench:demo end -->\nmore prose\n")
    assert "python -c print('figure 1.23')" in text  # says which command wrote it
    again, _ = regenerate(text, [block], base=None)
    assert again.count("bench:demo begin") == 1


def test_a_failed_bench_says_its_stdout_and_its_stderr_and_nothing_is_written() -> None:
    """A long bench prints what passed before it failed (bench.suite_time's rounds): the error keeps it."""
    failing = Block("demo", ("-c", "import sys; print('round 1 passed'); sys.exit('round 2 failed')"))
    with pytest.raises(RuntimeError) as failed:
        regenerate(README, [failing], base=None)
    assert str(failed.value).endswith(":\nround 1 passed\nround 2 failed")


def test_a_block_without_markers_is_reported_missing_and_nothing_changes() -> None:
    text, missing = regenerate(README, [Block("other", ("-c", "print(1)"))], base=None)
    assert (text, missing) == (README, ["other"])


def test_every_block_has_its_markers_in_the_file_it_names() -> None:
    """`bench.report --write` finds every block where it looks (docs moved: the markers moved with them)."""
    missing = [f"{b.readme.name}: {b.name}" for b in BLOCKS if not _begin(b.name).search(b.readme.read_text("utf-8"))]
    assert missing == []


def test_the_compare_table_has_a_row_per_tree_with_its_median() -> None:
    results = {
        "abc (this tree)": [{"value": s, "unit": "s", "requests": 20} for s in (0.5, 0.7, 0.6)],
        "def (main)": [{"value": s, "unit": "s", "requests": 40} for s in (1.0, 1.4, 1.2)],
    }
    table = _table(results, runs=3, probe_args=["change", "8", "0", "all-balanced"])
    lines = table.splitlines()
    assert lines[2].split()[:2] == ["abc", "(this"]
    assert lines[2].split()[-5:] == ["3", "0.60", "0.50", "0.70", "20"]
    assert lines[3].split()[-1] == "40"
    assert "this tree / other: 0.50 of the median" in table
    assert lines[0].split()[-4:] == ["median-s", "min-s", "max-s", "api-requests"]


def test_the_idle_probe_compares_megabytes() -> None:
    results = {name: [{"value": 100.0, "unit": "MiB", "requests": 0}] for name in ("abc (this tree)", "def (x)")}
    header = _table(results, runs=1, probe_args=["idle", "30"]).splitlines()[0]
    assert header.split()[-4:] == ["median-MiB", "min-MiB", "max-MiB", "api-requests"]


def test_the_demo_probe_compares_cpu_seconds_with_wall_seconds_and_failed_runs() -> None:
    results: dict[str, list[dict[str, Any]]] = {
        "abc (this tree)": [{"value": 6.0, "unit": "cpu-s", "requests": 0, "wall_s": 15.0, "failed": False}] * 2,
        "def (x)": [{"value": 150.0, "unit": "cpu-s", "requests": 0, "wall_s": 180.0, "failed": f} for f in (0, 1)],
    }
    lines = _table(results, runs=2, probe_args=["demo"]).splitlines()
    assert lines[0].split()[-5:] == ["median-cpu-s", "min-cpu-s", "max-cpu-s", "median-wall-s", "failed-runs"]
    assert lines[2].split()[-6:] == ["2", "6.00", "6.00", "6.00", "15.00", "0"]
    assert lines[3].split()[-2:] == ["180.00", "1"]
