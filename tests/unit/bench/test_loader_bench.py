"""Smoke test of the loader bench in quick mode: structure only, never timings."""

from __future__ import annotations

from bench.loader_bench import FILES, main


def test_the_loader_bench_prints_one_row_per_file_with_its_configs() -> None:
    files, _generated = main(["--quick"]).split("\n\n")
    lines = files.splitlines()
    assert lines[0].split() == ["file", "configs", "entries", "median", "s", "max", "s"]
    rows = {line.split()[0]: line.split()[1:3] for line in lines[1:]}
    assert set(rows) == {path.name for path in FILES}
    assert rows["mig-parted-default-names.yaml"][0] == "81"


def test_the_loader_bench_loads_and_validates_generated_files_of_each_size() -> None:
    generated = main(["--quick"]).split("\n\n")[1].splitlines()
    assert generated[0].split() == ["generated", "file", "configs", "load", "s", "validate", "s", "total", "s"]
    assert [" ".join(line.split()[:2]) for line in generated[1:]] == ["100 kB", "1 MB"]
    assert int(generated[2].split()[2]) > 4000  # 1 MB holds thousands of configs
