"""CLI start-up bench: wall time of short commands, run as a user runs them, and what they import.

Each command runs `repeats` times as a fresh `python -m migagent ...` process (start-up included);
the table prints the median and the fastest run, and which heavy third-party packages the command
imported (read from `python -X importtime`). Figures only; no test looks at a time.

    python -m bench.cli_startup            # 7 runs per command
    python -m bench.cli_startup --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = "configs/mig-layouts/mig-layouts.yaml"
HEAVY_PACKAGES = ("kubernetes", "grpc", "prometheus_client", "pynvml", "watchdog", "tenacity", "structlog", "yaml")

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--version",),
    ("validate", "-f", SHIPPED),
    ("plan", "-f", SHIPPED, "-c", "all-balanced", "--gpu-model", "H100-80GB-SXM"),
)


@dataclass(frozen=True)
class StartupRow:
    argv: tuple[str, ...]
    seconds: tuple[float, ...]
    heavy_imports: tuple[str, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def top_level_imports(argv: tuple[str, ...]) -> set[str]:
    """Top-level packages that `python -X importtime -m migagent argv` imported."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "migagent", *argv],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    names = set()
    for line in run.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def time_command(argv: tuple[str, ...], *, repeats: int) -> StartupRow:
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "migagent", *argv], cwd=ROOT, capture_output=True, check=True)
        seconds.append(time.perf_counter() - started)
    imported = top_level_imports(argv)
    return StartupRow(argv, tuple(seconds), tuple(p for p in HEAVY_PACKAGES if p in imported))


def render(rows: list[StartupRow]) -> str:
    lines = [
        "| command | median s | fastest s | heavy packages imported |",
        "|---|---|---|---|",
    ]
    for row in rows:
        imports = ", ".join(row.heavy_imports) or "none"
        lines.append(
            f"| `migagent {' '.join(row.argv)}` | {row.median:.2f} | {min(row.seconds):.2f} | {imports} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    print(render([time_command(command, repeats=args.repeats) for command in COMMANDS]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
