"""Judge one model's pairs (cases.py) on one simulated node, both ways, and say what each pair got.

mig-parted first: a fresh node, `nvidia-mig-parted apply` of the generated config, then `migagent
assert` of it, then both exports. migagent first: another fresh node of the same shape, `migagent
apply`, then `nvidia-mig-parted assert`, then both exports. A whole-node command that fails is
rerun per GPU (`gpu-i`, on a fresh node for an apply) to name the pair it failed for.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from migagent.catalog import GpuModel
from migagent_sim.gpu_node.session import NodeSession
from tests.judge.cases import JUDGE_CONFIG, MIG_LAYOUTS, Pair, exported_by_gpu, judge_config, pairs
from tests.judge.commands import Commands, Outcome

SOURCES = ("mig-layouts", "nvidia-default")
CHECKS = ("mig-parted apply, migagent assert", "migagent apply, mig-parted assert", "exports agree")
GpuLayout = tuple[bool, dict[str, int]]


@dataclass
class Verdicts:
    """What went wrong, in words, per pair index (-1: the whole node) and per check of CHECKS."""

    pairs: list[Pair]
    problems: dict[int, list[tuple[str, str]]] = field(default_factory=dict)

    def add(self, index: int, check: str, problem: str) -> None:
        self.problems.setdefault(index, []).append((check, problem))

    def passed(self, check: str) -> int:
        """Pairs for which `check` found nothing wrong."""
        if any(c == check for c, _ in self.problems.get(-1, [])):
            return 0
        return sum(1 for i in range(len(self.pairs)) if all(c != check for c, _ in self.problems.get(i, [])))

    def lines(self) -> list[str]:
        return [
            f"{self.pairs[i].label if i >= 0 else 'whole node'}: {check}: {problem}"
            for i, found in sorted(self.problems.items())
            for check, problem in found
        ]


@dataclass
class Judge:
    commands: Commands
    pairs: list[Pair]

    @property
    def config(self) -> Path:
        return self.commands.workdir / "judge.yaml"

    def fresh(self, name: str) -> Path:
        state = self.commands.workdir / f"{name}.json"
        for stale in state.parent.glob(f"{state.name}*"):  # the state, its lock, its clients directory
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
        return state

    def exports(self, state: Path) -> tuple[dict[int, GpuLayout], dict[int, GpuLayout]]:
        theirs, ours = self.commands.export("mig-parted", state), self.commands.export("migagent", state)
        if theirs[0] != 0 or ours[0] != 0:
            raise AssertionError(f"export failed: mig-parted {theirs}, migagent {ours}")
        return exported_by_gpu(theirs[1], len(self.pairs)), exported_by_gpu(ours[1], len(self.pairs))

    def each_gpu(self, check: Callable[[int], Outcome]) -> dict[int, str]:
        """Per-GPU reruns of a failed whole-node command: index -> output of the GPUs that fail alone."""
        failed: dict[int, str] = {}
        for index in range(len(self.pairs)):
            code, output = check(index)
            if code != 0:
                failed[index] = output.strip().splitlines()[-1] if output.strip() else f"exit {code}"
        return failed

    def direction(self, applier: str, asserter: str, verdicts: Verdicts) -> None:
        check = CHECKS[0] if applier == "mig-parted" else CHECKS[1]
        state = self.fresh(f"{applier}-first")
        code, output = self.commands.apply(applier, state, self.config, JUDGE_CONFIG)
        if code != 0:
            alone = self.each_gpu(
                lambda i: self.commands.apply(applier, self.fresh(f"{applier}-gpu-{i}"), self.config, f"gpu-{i}")
            )
            for index, line in alone.items():
                verdicts.add(index, check, f"{applier} apply failed: {line}")
            if not alone:
                verdicts.add(-1, check, f"{applier} apply of the whole node failed, no GPU alone: {output[-400:]}")
            return
        if self.commands.check(asserter, state, self.config, JUDGE_CONFIG)[0] != 0:
            alone = self.each_gpu(lambda i: self.commands.check(asserter, state, self.config, f"gpu-{i}"))
            for index, line in alone.items():
                verdicts.add(index, check, f"{asserter} assert after {applier} apply: {line}")
        theirs, ours = self.exports(state)
        for index in range(len(self.pairs)):
            if theirs.get(index) != ours.get(index):
                found = f"mig-parted {theirs.get(index)}, migagent {ours.get(index)}"
                verdicts.add(index, CHECKS[2], f"exports differ after {applier} apply: {found}")

    def run(self) -> Verdicts:
        self.config.write_text(judge_config(self.pairs), encoding="utf-8")
        verdicts = Verdicts(self.pairs)
        self.direction("mig-parted", "migagent", verdicts)
        self.direction("migagent", "mig-parted", verdicts)
        return verdicts


def config_file(source: str, tools: Path) -> Path:
    return MIG_LAYOUTS if source == "mig-layouts" else tools / "config-default.yaml"


def judge_model(source: str, model: GpuModel, tools: Path, library: Path) -> Verdicts:
    """All of `source`'s pairs for `model`, judged on one node (nothing to judge: no verdicts)."""
    judged = pairs(config_file(source, tools), model)
    if not judged:
        return Verdicts(judged)
    with tempfile.TemporaryDirectory(prefix=f"judge-{model.key}-") as work:
        shape = Path(work) / "shape.json"
        with NodeSession(shape, spec=f"{len(judged)}x{model.key}", library=library) as session:
            return Judge(Commands(session, tools, Path(work)), judged).run()
