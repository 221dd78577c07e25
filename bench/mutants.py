"""Run the attempt's one-line mutants against the unit tests and print which were caught.

Each mutant replaces one line of one module of the attempt (the change window's rules, the gate's
plan-once rule; the rule it breaks is named). The tree is copied to a temporary directory, the line
replaced there, and `tests/unit/attempt` run in that copy (the working tree is never changed). A
mutant is caught when a unit test fails.

    python -m bench.mutants            # every mutant
    python -m bench.mutants --list     # the mutants, without running them
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WINDOW = Path("migagent/attempt/window/change_window.py")
GATE = Path("migagent/attempt/drain/gate.py")
TESTS = ("tests/unit/attempt",)


@dataclass(frozen=True)
class Mutant:
    name: str
    line: str
    """The line as it stands (stripped), found exactly once in the file."""
    replacement: str
    """What replaces it, at the same indentation."""
    target: Path = WINDOW


MUTANTS = (
    Mutant("adopt ignores our leftover cordon", "if cordoned_by_us(node):", "if False:"),
    Mutant(
        "cordon is not undone",
        "self._undo.push(UNCORDON, self._lift_cordon)\n            if not already:",
        "pass\n            if not already:",
    ),
    Mutant("pause_again is a no-op", "if RESUME_PLUGIN not in self._undo:\n            self.pause()", "return"),
    Mutant("gpus_may_change leaves the GPUs unmarked", "self.gpus_touched = True", "self.gpus_touched = False"),
    Mutant(
        "after_change leaves the host clients to be started again",
        "self._undo.pop(START_HOST_CLIENTS)\n\n    def resume_plugin",
        "pass\n\n    def resume_plugin",
    ),
    Mutant(
        "resume_plugin leaves the resume open",
        "self._undo.pop(RESUME_PLUGIN)\n        self._status.event(EventReason.DEVICE_PLUGIN_RESTARTED",
        "pass\n        self._status.event(EventReason.DEVICE_PLUGIN_RESTARTED",
    ),
    Mutant(
        "uncordon does not lift the cordon",
        "self._lift_cordon()\n            self._undo.pop(UNCORDON)",
        "self._undo.pop(UNCORDON)",
    ),
    Mutant("hand_over leaves host services stopped", "self._undo.run(START_HOST_CLIENTS)", "pass"),
    Mutant("abandon does not settle the GPUs", "self._settle_gpus()", "pass"),
    Mutant("unwind undoes nothing", "return self._undo.unwind()", "return ()"),
    Mutant(
        "the gate plans again with no pod on a GPU instance",
        "steps = planner(target.observation, target.desired) if workloads else target.steps",
        "steps = planner(target.observation, target.desired)",
        GATE,
    ),
)


def mutate(source: str, mutant: Mutant) -> str:
    if source.count(mutant.line) != 1:
        raise SystemExit(f"mutant {mutant.name!r}: its line is not in {mutant.target} exactly once")
    return source.replace(mutant.line, mutant.replacement)


def copy_tree(into: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.splitlines()
    for name in listed:
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)


def caught(copy: Path, mutant: Mutant, original: str) -> tuple[bool, str]:
    (copy / mutant.target).write_text(mutate(original, mutant), encoding="utf-8")
    try:
        run = subprocess.run(
            # one process: a few seconds of tests, where starting the suite's workers would cost more than them
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", "-n", "0", *TESTS],
            cwd=copy, capture_output=True, text=True, check=False,
        )
    finally:
        (copy / mutant.target).write_text(original, encoding="utf-8")
    failed = [line.split(" ")[1] for line in run.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return run.returncode != 0, failed[0] if failed else run.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list the mutants without running them")
    args = parser.parse_args()
    originals = {m.target: (ROOT / m.target).read_text(encoding="utf-8") for m in MUTANTS}
    for mutant in MUTANTS:
        mutate(originals[mutant.target], mutant)  # every mutant applies before any runs
    if args.list:
        for mutant in MUTANTS:
            print(mutant.name)
        return
    with tempfile.TemporaryDirectory(prefix="migagent-mutants-") as tmp:
        copy = Path(tmp)
        copy_tree(copy)
        rows = [(mutant.name, *caught(copy, mutant, originals[mutant.target])) for mutant in MUTANTS]
    width = max(len(name) for name, _, _ in rows)
    for name, killed, by in rows:
        print(f"{name:<{width}}  {'caught' if killed else 'MISSED'}  {by}")
    print(f"{sum(killed for _, killed, _ in rows)} of {len(rows)} mutants caught by {' '.join(TESTS)}")
    if not all(killed for _, killed, _ in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
