"""CLI start-up bench: wall time of short commands, run as a user runs them, and what they import.

Each command runs `repeats` times as a fresh `python -m migagent ...` process (start-up included);
the table prints the median wall and CPU (user + system) seconds, and which heavy third-party
packages the command imported (read from `python -X importtime`). The last row runs `validate` with
the Kubernetes client imported first, as every command did before commands were imported lazily:
the same machine, the same moment, so the difference is the saving even on a busy machine.
Figures only; no test looks at a time.

    python -m bench.cli_startup            # 7 runs per command
    python -m bench.cli_startup --repeats 3
"""

from __future__ import annotations

import argparse
import resource
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
    ("advise", "--help"),
    ("autopilot", "run", "--help"),
)
# `python -c` with this prefix, then `main(argv)`: the eager import every command paid before.
KUBERNETES_FIRST = "import sys, kubernetes.client; from migagent.cli import main; sys.exit(main(sys.argv[1:]))"


@dataclass(frozen=True)
class StartupRow:
    label: str
    seconds: tuple[float, ...]
    cpu_seconds: tuple[float, ...]
    heavy_imports: tuple[str, ...]


def top_level_imports(command: list[str]) -> set[str]:
    """Top-level packages that `python -X importtime <command>` imported."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", *command],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    names = set()
    for line in run.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_command(command: list[str], *, label: str, repeats: int) -> StartupRow:
    """`command` (the arguments after `python`) run `repeats` times."""
    seconds, cpu = [], []
    for _ in range(repeats):
        started, cpu_before = time.perf_counter(), _children_cpu()
        subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, check=True)
        seconds.append(time.perf_counter() - started)
        cpu.append(_children_cpu() - cpu_before)
    imported = top_level_imports(command)
    return StartupRow(label, tuple(seconds), tuple(cpu), tuple(p for p in HEAVY_PACKAGES if p in imported))


def all_rows(repeats: int) -> list[StartupRow]:
    rows = [
        time_command(["-m", "migagent", *argv], label=f"migagent {' '.join(argv)}", repeats=repeats)
        for argv in COMMANDS
    ]
    validate = ["validate", "-f", SHIPPED]
    label = f"migagent {' '.join(validate)}, kubernetes imported first"
    rows.append(time_command(["-c", KUBERNETES_FIRST, *validate], label=label, repeats=repeats))
    return rows


def render(rows: list[StartupRow]) -> str:
    lines = [
        "| command | median wall s | median CPU s | heavy packages imported |",
        "|---|---|---|---|",
    ]
    for row in rows:
        imports = ", ".join(row.heavy_imports) or "none"
        wall, cpu = statistics.median(row.seconds), statistics.median(row.cpu_seconds)
        lines.append(f"| `{row.label}` | {wall:.2f} | {cpu:.2f} | {imports} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    print(render(all_rows(args.repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
