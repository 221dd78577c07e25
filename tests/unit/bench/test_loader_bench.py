"""Smoke test of the loader bench in quick mode: structure only, never timings."""

from __future__ import annotations

from bench.loader_bench import FILES, main


def test_the_loader_bench_prints_one_row_per_file_with_its_configs() -> None:
    lines = main(["--quick"]).splitlines()
    assert lines[0].split() == ["file", "configs", "entries", "median", "s", "max", "s"]
    rows = {line.split()[0]: line.split()[1:3] for line in lines[1:]}
    assert set(rows) == {path.name for path in FILES}
    assert rows["mig-parted-default-names.yaml"][0] == "81"
