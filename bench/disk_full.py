"""Disk-full transitions: `python -m bench.disk_full [--quick] [--code DIR]` (root: it mounts tmpfs).

How the review met ENOSPC: `migagent apply` as its own process on a simulated node (`--state`),
its journal (`--journal-dir`) on a 64 KiB tmpfs filled up but for a little room, 0 to 36 KiB in
1 KiB steps, for four transitions. Each trial: the apply on the nearly full disk, `assert` of the
target, then the same apply again on the same disk. A row per distinct outcome: exit codes, the
journal's phase after the second apply, and the first words of the apply's one-line error.

What a careful operator expects, and what this counts: no internal error (exit 70) and no engine
error such as an illegal phase change; a refusal before any GPU changes where the disk cannot hold
the apply; never `applying` or `failed` left in the journal by an apply that had nothing to do.
`--code DIR` runs another checkout's migagent (e.g. `git archive main | tar -x -C DIR`) for comparison.
Figures, not assertions (bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from bench.tables import render_table

TRANSITIONS = (
    ("all-1g.10gb", "all-balanced"),
    ("all-disabled", "all-balanced"),
    ("all-balanced", "all-3g.40gb"),
    ("all-7g.80gb", "all-1g.10gb"),
)
SPEC = "2xH100-80GB-SXM"
PAGE = 4096


def _migagent(code: Path, *words: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    # Run from `code`: `-m` puts the working directory first on the path, before PYTHONPATH.
    return subprocess.run([sys.executable, "-m", "migagent", *words], capture_output=True, text=True, env=env,
                          cwd=code, check=False, timeout=600)


def _fill(mount: Path, room: int) -> None:
    filler = mount / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * PAGE)
    except OSError:
        pass
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - room))


def _phase(journal: Path) -> str:
    try:
        return str(json.loads((journal / "journal.json").read_text())["phase"])
    except (OSError, ValueError, KeyError) as exc:
        return type(exc).__name__


def _trial(code: Path, work: Path, start: str, target: str, room: int) -> tuple[int, int, int, str, str]:
    layouts = str(code / "configs/mig-layouts/mig-layouts.yaml")
    state, mount = work / "node.json", work / "mnt"
    for leftover in (state, work / "node.json.journal"):
        subprocess.run(["rm", "-rf", str(leftover)], check=True)
    mount.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=True)
    try:
        created = _migagent(code, "apply", "-f", layouts, "-c", start, "--simulate", SPEC, "--state", str(state))
        if created.returncode != 0:
            raise RuntimeError(created.stderr)
        _fill(mount, room)
        node = ["-f", layouts, "-c", target, "--state", str(state)]
        first = _migagent(code, "apply", *node, "--journal-dir", str(mount / "j"))
        asserted = _migagent(code, "assert", *node)
        second = _migagent(code, "apply", *node, "--journal-dir", str(mount / "j"))
        said = [line for line in first.stderr.splitlines() if line.startswith("migagent apply:")]
        words = said[-1].removeprefix("migagent apply: ")[:46] if said else ""
        return first.returncode, asserted.returncode, second.returncode, _phase(mount / "j"), words
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="room in 4 KiB steps instead of 1 KiB")
    parser.add_argument("--code", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout whose migagent runs (default: this one)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench.disk_full mounts tmpfs: run it as root", file=sys.stderr)
        return 1
    step = PAGE if args.quick else 1024
    outcomes: Counter[tuple[int, int, int, str, str]] = Counter()
    with tempfile.TemporaryDirectory(prefix="migagent-disk-full-") as directory:
        for start, target in TRANSITIONS:
            for room in range(0, 9 * PAGE, step):
                outcomes[_trial(args.code, Path(directory), start, target, room)] += 1
    rows = [[words or "-", phase, str(a), str(c), str(r), str(n)]
            for (a, c, r, phase, words), n in sorted(outcomes.items(), key=lambda item: -item[1])]
    print(f"Disk-full transitions ({sum(outcomes.values())}), {args.code}")
    print(render_table(["the apply's error (its start)", "journal after", "apply", "assert", "again", "trials"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
