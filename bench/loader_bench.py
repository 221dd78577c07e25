"""How long the layout loader takes to read real files, through the go-yaml v2 compatible pipeline.

    python -m bench.loader_bench            # 50 reads per file
    python -m bench.loader_bench --quick    # 3 reads per file

Prints a table: per file, its configs and entries and the median and max seconds of a full
`load_layout_file` (read, scan, compose, go-yaml v2 value rules, JSON keys, schema checks). Figures
only; no test looks at a time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from migagent.layout.parse import load_layout_file

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


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="3 reads per file instead of 50")
    args = parser.parse_args(argv)
    rows = [measure(path, 3 if args.quick else 50) for path in FILES]
    text = table(rows)
    print(text)
    return text


if __name__ == "__main__":
    main()
