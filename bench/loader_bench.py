"""How long the layout loader takes to read real files, through the go-yaml v2 compatible pipeline.

    python -m bench.loader_bench            # 50 reads per file; generated 100 kB, 1 MB, 10 MB files
    python -m bench.loader_bench --quick    # 3 reads per file; generated 100 kB and 1 MB only

Prints a table: per file, its configs and entries and the median and max seconds of a full
`load_layout_file` (read, scan, compose, go-yaml v2 value rules, JSON keys, schema checks); then,
for generated files of 100 kB, 1 MB (a ConfigMap's limit) and 10 MB (`bench.layout_gen`), the
seconds of the load and of `validate_layout` on every catalog model, what `migagent validate`
does. Figures only; no test looks at a time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.layout_gen import generate
from migagent.layout.parse import load_layout_file
from migagent.planning.validation import validate_layout

ROOT = Path(__file__).resolve().parents[1]
FILES = (
    ROOT / "configs" / "mig-layouts" / "mig-layouts.yaml",
    ROOT / "tests" / "unit" / "layout" / "data" / "mig-parted-default-names.yaml",
    ROOT / "tests" / "unit" / "layout" / "data" / "mig-parted-style.yaml",
)


@dataclass(frozen=True)
class LoadRow:
    name: str
    configs: int
    entries: int
    seconds: tuple[float, ...]


def measure(path: Path, repeats: int) -> LoadRow:
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        layout = load_layout_file(path)
        seconds.append(time.perf_counter() - start)
    entries = sum(len(config) for config in layout.configs.values())
    return LoadRow(path.name, len(layout.configs), entries, tuple(seconds))


def table(rows: list[LoadRow]) -> str:
    lines = [f"{'file':<34} {'configs':>7} {'entries':>7} {'median s':>9} {'max s':>7}"]
    lines += [
        f"{r.name:<34} {r.configs:>7} {r.entries:>7} {statistics.median(r.seconds):>9.4f} {max(r.seconds):>7.4f}"
        for r in rows
    ]
    return "\n".join(lines)


GENERATED_SIZES = (100_000, 1_000_000, 10_000_000)


@dataclass(frozen=True)
class LargeRow:
    size: int
    configs: int
    load_s: float
    validate_s: float


def measure_generated(size: int) -> LargeRow:
    with tempfile.TemporaryDirectory(prefix="migagent-loader-bench-") as workdir:
        path = Path(workdir) / f"generated-{size}.yaml"
        path.write_text(generate(size), encoding="utf-8")
        start = time.perf_counter()
        layout = load_layout_file(path)
        loaded = time.perf_counter()
        reports = validate_layout(layout, config=None, models=None)
        validated = time.perf_counter()
    assert all(report.problems == [] for report in reports)
    return LargeRow(size, len(layout.configs), loaded - start, validated - loaded)


def large_table(rows: list[LargeRow]) -> str:
    lines = [f"{'generated file':<16} {'configs':>7} {'load s':>7} {'validate s':>10} {'total s':>8}"]
    lines += [
        f"{_size(r.size):<16} {r.configs:>7} {r.load_s:>7.2f} {r.validate_s:>10.2f} {r.load_s + r.validate_s:>8.2f}"
        for r in rows
    ]
    return "\n".join(lines)


def _size(size: int) -> str:
    return f"{size // 1_000_000} MB" if size >= 1_000_000 else f"{size // 1000} kB"


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="3 reads per file instead of 50; no 10 MB file")
    args = parser.parse_args(argv)
    rows = [measure(path, 3 if args.quick else 50) for path in FILES]
    sizes = GENERATED_SIZES[:2] if args.quick else GENERATED_SIZES
    text = table(rows) + "\n\n" + large_table([measure_generated(size) for size in sizes])
    print(text)
    return text


if __name__ == "__main__":
    main()
