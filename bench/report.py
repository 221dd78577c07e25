"""Regenerate the docs' figures from the benches' own output: `python -m bench.report [--write]`.

Each figures block (bench/README.md's, docs/demand.md's, the suite's time in the README, the suite's and
CI's in docs/testing.md) sits between
`<!-- bench:NAME begin ... -->` and `<!-- bench:NAME end -->`; this runs that block's bench as a
fresh process and puts its stdout there verbatim, under one line saying when, at which commit, on
how many cores and at what load it ran. Without `--write` the new blocks are printed and the files
are left alone. Figures are never typed by hand; the prose around them says how to read them.

    python -m bench.report --write                       # every block (several minutes)
    python -m bench.report --write --only agent,journal  # some blocks
    python -m bench.report --write --only compare --compare-with fd9ca0f
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).with_name("README.md")
REPO = README.parents[1]
PROJECT_README = REPO / "README.md"
DEMAND_DOC = REPO / "docs" / "demand.md"
TESTING = REPO / "docs" / "testing.md"


@dataclass(frozen=True)
class Block:
    name: str
    argv: tuple[str, ...]
    """After `python`: the bench command whose stdout fills the block."""
    readme: Path = README
    """The file that holds the block's markers (bench/README.md, the project's README, docs/demand.md,
    docs/testing.md)."""


BLOCKS = (
    Block("planner", ("-m", "bench.planner_bench")),
    Block("agent", ("-m", "bench.agent_bench")),
    Block("idle-fleet", ("-m", "bench.idle_fleet")),
    Block("journal", ("-m", "bench.journal_bench")),
    Block("demand", ("-m", "bench.demand_bench")),
    Block("advise-scaling", ("-m", "bench.advise_scaling"), readme=DEMAND_DOC),
    Block("autopilot-requests", ("-m", "bench.autopilot_requests"), readme=DEMAND_DOC),
    Block("demand-fleet", ("-m", "bench.demand_bench", "--scale", "16", "--hours", "6"), readme=DEMAND_DOC),
    Block("compare", ("-m", "bench.compare", "{base}", "--runs", "7")),
    Block("compare-journal", ("-m", "bench.compare", "{base}", "--runs", "3", "--probe", "journal", "--gpus", "16")),
    Block("compare-version", ("-m", "bench.compare", "{base}", "--runs", "5", "--probe", "version")),
    Block("compare-idle", ("-m", "bench.compare", "{base}", "--runs", "3", "--probe", "idle")),
    Block("compare-demo", ("-m", "bench.compare", "{base}", "--runs", "3", "--probe", "demo")),
    Block("chaos", ("-m", "bench.chaos", "--quick")),
    Block("cli-startup", ("-m", "bench.cli_startup",)),
    Block("fakelib", ("-m", "bench.fakelib_bench",)),
    Block("loader", ("-m", "bench.loader_bench", "--quick")),
    Block("eviction", ("-m", "bench.eviction_bench",)),
    Block("real-node", ("-m", "bench.real_node", "--runs", "3")),
    Block("suite", ("-m", "bench.suite_time", "--tiers", "--where"), readme=PROJECT_README),
    Block("suite-beside", ("-m", "bench.suite_time", "--beside", "3"), readme=TESTING),
    Block("ci-warm", ("-m", "bench.ci_time",), readme=TESTING),
    Block("ci-cold", ("-m", "bench.ci_time", "--cold"), readme=TESTING),
)


def _begin(name: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- bench:{re.escape(name)} begin[^>]*-->\n.*?<!-- bench:{re.escape(name)} end -->", re.S)


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout.strip()


def _commit() -> str:
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return _git("rev-parse", "--short", "HEAD") + (" plus uncommitted changes" if dirty else "")


def run_block(block: Block, *, base: str | None) -> str:
    """The block's new text: its markers, one line about where it ran, and the bench's stdout."""
    argv = [arg.format(base=base or "") for arg in block.argv]
    load_before = os.getloadavg()[0]
    started = datetime.datetime.now(datetime.UTC)
    measured = _commit()  # before the run: a commit made while a long bench runs is not what it measured
    done = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = "\n".join(text for text in (done.stdout.strip()[-2000:], done.stderr.strip()[-2000:]) if text)
        raise RuntimeError(f"`python {' '.join(argv)}` failed:\n{said}")  # stdout too: the rounds that passed
    where = (
        f"`python {' '.join(argv)}` at {measured}, {started:%Y-%m-%d %H:%M} UTC; Python {platform.python_version()},"
        f" {os.cpu_count()} CPU cores shared with other jobs, load average {load_before:.1f} at the start and"
        f" {os.getloadavg()[0]:.1f} at the end"
    )
    output = done.stdout.rstrip("\n")
    return (
        f"<!-- bench:{block.name} begin: written by `python -m bench.report --write`; do not edit by hand -->\n"
        f"{where}:\n\n```\n{output}\n```\n<!-- bench:{block.name} end -->"
    )


def regenerate(text: str, blocks: Sequence[Block], *, base: str | None) -> tuple[str, list[str]]:
    """`text` with each of `blocks` that has markers in it rerun; and the names that had none."""
    missing = []
    for block in blocks:
        pattern = _begin(block.name)
        if not pattern.search(text):
            missing.append(block.name)
            continue
        match = pattern.search(text)
        assert match is not None
        text = text[: match.start()] + run_block(block, base=base) + text[match.end() :]
    return text, missing


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the blocks into their files (else print them)")
    parser.add_argument("--only", help=f"comma-separated blocks (default all: {', '.join(b.name for b in BLOCKS)})")
    parser.add_argument("--compare-with", help="the commit the `compare` block measures against (needed for it)")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else [b.name for b in BLOCKS]
    unknown = sorted(set(names) - {b.name for b in BLOCKS})
    if unknown:
        parser.error(f"unknown block(s) {', '.join(unknown)}; known: {', '.join(b.name for b in BLOCKS)}")
    comparing = [name for name in names if name.startswith("compare")]
    if comparing and not args.compare_with:
        if args.only:
            parser.error("the compare blocks need --compare-with REV")
        names = [name for name in names if name not in comparing]
    chosen = [b for b in BLOCKS if b.name in names]
    all_missing = []
    for readme in dict.fromkeys(b.readme for b in chosen):  # each file once, in the order of BLOCKS
        blocks = [b for b in chosen if b.readme == readme]
        new, missing = regenerate(readme.read_text(encoding="utf-8"), blocks, base=args.compare_with)
        all_missing += missing
        for name in missing:
            where = readme.relative_to(REPO)
            print(f"{where} has no block `{name}` (markers <!-- bench:{name} begin --> ... end)", file=sys.stderr)
        if args.write:
            readme.write_text(new, encoding="utf-8")
        else:
            for block in blocks:
                match = _begin(block.name).search(new)
                if match:
                    print(match.group(0), end="\n\n")
    return 1 if all_missing else 0


if __name__ == "__main__":
    sys.exit(main())
