"""Judge one model's pairs (cases.py) on one simulated node, both ways, and say what each pair got.

mig-parted first: a fresh node, `nvidia-mig-parted apply` of the generated config, then `migagent
assert` of it, then both exports. migagent first: another fresh node of the same shape, `migagent
apply`, then `nvidia-mig-parted assert`, then both exports. When a whole-node command fails, the
pair it failed for is named: an apply is rerun per GPU (`gpu-i`, on a fresh node); migagent's
assert per GPU; mig-parted's assert cannot be (it fails unless every GPU of the node is selected),
so its export, which reads the GPU as its assert does, says which GPUs differ from their entry.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migagent.catalog import GpuModel
from migagent_sim.gpu_node.session import NodeSession
from tests.judge.cases import JUDGE_CONFIG, MIG_LAYOUTS, Pair, exported_by_gpu, judge_config, pairs
from tests.judge.commands import Commands, Outcome

SOURCES = ("mig-layouts", "nvidia-default")
CHECKS = ("mig-parted apply, migagent assert", "migagent apply, mig-parted assert", "exports agree")
GpuLayout = tuple[bool, dict[str, int]]
# Profile attributes newer than a mig-parted release, by release. v0.10.0 carries go-nvlib v0.7.0
# and go-nvml's first 10 GI profile enums, from before RTX PRO Blackwell's media profiles: it
# refuses to parse `-me` and `+me.all` names (a whole config file holding one), and reports a
# `+gfx` config applied while creating nothing, its GIs invisible to it. A pair naming one is not
# judged by that release; every other failure is a disagreement.
BEYOND_RELEASE = {"v0.10.0": ("-me", "+gfx", "+me.all")}


def beyond(entry: dict[str, Any], mig_parted_version: str) -> bool:
    """Whether a config entry names a profile newer than the mig-parted release."""
    names = entry.get("mig-devices") or {}
    return any(attribute in name for name in names for attribute in BEYOND_RELEASE.get(mig_parted_version, ()))


@dataclass
class Verdicts:
    """What went wrong, in words, per pair index (-1: the whole node) and per check of CHECKS."""

    pairs: list[Pair]
    beyond: set[int] = field(default_factory=set)
    """Pairs the mig-parted release cannot judge (BEYOND_RELEASE): left out."""
    problems: dict[int, list[tuple[str, str]]] = field(default_factory=dict)

    def add(self, index: int, check: str, problem: str) -> None:
        self.problems.setdefault(index, []).append((check, problem))

    def judged(self) -> list[int]:
        return [i for i in range(len(self.pairs)) if i not in self.beyond]

    def passed(self, check: str) -> int:
        """Judged pairs for which `check` found nothing wrong."""
        if any(c == check for c, _ in self.problems.get(-1, [])):
            return 0
        return sum(1 for i in self.judged() if all(c != check for c, _ in self.problems.get(i, [])))

    def lines(self) -> list[str]:
        return [
            f"{self.pairs[i].label if i >= 0 else 'whole node'}: {check}: {problem}"
            for i, found in sorted(self.problems.items())
            for check, problem in found
        ]


@dataclass
class Judge:
    commands: Commands
    verdicts: Verdicts

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
        gpus = len(self.verdicts.pairs)
        return exported_by_gpu(theirs[1], gpus), exported_by_gpu(ours[1], gpus)

    def each_gpu(self, check: Callable[[int], Outcome]) -> dict[int, str]:
        """Per-GPU reruns of a failed whole-node command: index -> output of the GPUs that fail alone."""
        failed: dict[int, str] = {}
        for index in self.verdicts.judged():
            code, output = check(index)
            if code != 0:
                failed[index] = output.strip().splitlines()[-1] if output.strip() else f"exit {code}"
        return failed

    def wanted(self, index: int) -> GpuLayout:
        entry = self.verdicts.pairs[index].entry
        return bool(entry["mig-enabled"]), dict(entry.get("mig-devices") or {})

    def direction(self, applier: str, asserter: str) -> None:
        verdicts, check = self.verdicts, CHECKS[0] if applier == "mig-parted" else CHECKS[1]
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
        asserted = self.commands.check(asserter, state, self.config, JUDGE_CONFIG)
        theirs, ours = self.exports(state)
        if asserted[0] != 0 and asserter == "migagent":
            alone = self.each_gpu(lambda i: self.commands.check(asserter, state, self.config, f"gpu-{i}"))
            for index, line in alone.items():
                verdicts.add(index, check, f"migagent assert after {applier} apply: {line}")
        elif asserted[0] != 0:
            differ = [i for i in verdicts.judged() if theirs.get(i) != self.wanted(i)] or [-1]
            for index in differ:
                verdicts.add(index, check, f"mig-parted assert after {applier} apply: {asserted[1].strip()[-300:]}")
        for index in verdicts.judged():
            if theirs.get(index) != ours.get(index):
                found = f"mig-parted {theirs.get(index)}, migagent {ours.get(index)}"
                verdicts.add(index, CHECKS[2], f"exports differ after {applier} apply: {found}")

    def run(self) -> Verdicts:
        self.config.write_text(judge_config(self.verdicts.pairs, skip=self.verdicts.beyond), encoding="utf-8")
        self.direction("mig-parted", "migagent")
        self.direction("migagent", "mig-parted")
        return self.verdicts


def config_file(source: str, tools: Path) -> Path:
    return MIG_LAYOUTS if source == "mig-layouts" else tools / "config-default.yaml"


def judge_model(source: str, model: GpuModel, tools: Path, library: Path, mig_parted_version: str) -> Verdicts:
    """All of `source`'s pairs for `model`, judged on one node (nothing to judge: no verdicts)."""
    judged = pairs(config_file(source, tools), model)
    verdicts = Verdicts(judged, beyond={i for i, pair in enumerate(judged) if beyond(pair.entry, mig_parted_version)})
    if not verdicts.judged():
        return verdicts
    with tempfile.TemporaryDirectory(prefix=f"judge-{model.key}-") as work:
        shape = Path(work) / "shape.json"
        with NodeSession(shape, spec=f"{len(judged)}x{model.key}", library=library) as session:
            return Judge(Commands(session, tools, Path(work)), verdicts).run()
