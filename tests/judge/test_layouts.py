"""mig-parted as the judge of migagent's layouts, and migagent as the judge of mig-parted's: for every
config of configs/mig-layouts/ and of NVIDIA's config-default.yaml, on every MIG model the simulator
offers (the pairs of cases.py, one node per model): `nvidia-mig-parted apply` on a fresh node, then
`migagent assert` passes; `migagent apply` on a fresh node, then `nvidia-mig-parted assert` passes;
and on both nodes `nvidia-mig-parted export` and `migagent export` agree GPU by GPU. A config naming
profiles newer than the mig-parted release (batch.BEYOND_RELEASE: RTX PRO Blackwell's media
profiles for v0.10.0) is not judged by it; every other failure is a disagreement.

Each (source, model) is one test, a sequence of processes: the suite's workers judge several at once.
`python -m tests.judge.matrix` prints the matrix with its pass counts.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from migagent.catalog import GpuModel
from migagent_sim.gpu_node.nvidia_tools import versions
from tests.judge.batch import SOURCES, beyond, judge_model
from tests.judge.cases import MIG_LAYOUTS, judged_models


@pytest.mark.parametrize("model", judged_models(), ids=lambda model: model.key)
@pytest.mark.parametrize("source", SOURCES)
def test_both_tools_agree_on_every_config_for_the_model(
    source: str, model: GpuModel, nvidia_tools: Path, fake_library: Path
) -> None:
    found = judge_model(source, model, nvidia_tools, fake_library, versions()[0])
    assert found.pairs or source == "nvidia-default", f"{source} has no config for {model.key}"
    problems = found.lines()
    assert not problems, f"{len(problems)} problem(s) in {len(found.pairs)} pair(s):\n" + "\n".join(problems)


def test_mig_parted_parses_the_shipped_file_but_for_profiles_beyond_its_release(
    nvidia_tools: Path, tmp_path: Path
) -> None:
    """The matrix hands mig-parted generated files; this hands it configs/mig-layouts/ itself. Its
    parser reads a whole file at once: one name beyond its release (v0.10.0: RTX PRO's `-me`,
    `+me.all`) makes it refuse the file, every config in it (docs/verification.md)."""
    release = versions()[0]
    shipped = yaml.safe_load(MIG_LAYOUTS.read_text(encoding="utf-8"))
    configs = shipped["mig-configs"]
    beyond_names = {name for name, entries in configs.items() if any(beyond(e, release) for e in entries)}
    valid = [str(nvidia_tools / "nvidia-mig-parted"), "assert", "--valid-config", "-c", "all-balanced", "-f"]
    literal = subprocess.run([*valid, str(MIG_LAYOUTS)], capture_output=True, text=True, timeout=60, check=False)
    assert (literal.returncode == 0) == (not beyond_names), literal.stderr
    trimmed = tmp_path / "mig-layouts.yaml"
    kept = {name: entries for name, entries in configs.items() if name not in beyond_names}
    trimmed.write_text(yaml.safe_dump({**shipped, "mig-configs": kept}), encoding="utf-8")
    rest = subprocess.run([*valid, str(trimmed)], capture_output=True, text=True, timeout=60, check=False)
    assert rest.returncode == 0, rest.stderr
