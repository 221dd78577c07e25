"""mig-parted as the judge of migagent's layouts, and migagent as the judge of mig-parted's: for every
config of configs/mig-layouts/ and of NVIDIA's config-default.yaml, on every MIG model the simulator
offers (the pairs of cases.py, one node per model): `nvidia-mig-parted apply` on a fresh node, then
`migagent assert` passes; `migagent apply` on a fresh node, then `nvidia-mig-parted assert` passes;
and on both nodes `nvidia-mig-parted export` and `migagent export` agree GPU by GPU.

The models are judged two at a time (one per core; each judgement is a sequence of processes).
`python -m tests.judge.matrix` prints the matrix with its pass counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from migagent.catalog import GpuModel
from tests.judge.batch import SOURCES, Verdicts, judge_model
from tests.judge.cases import judged_models

Key = tuple[str, str]
WORKERS = 2


@pytest.fixture(scope="session")
def verdicts(request: pytest.FixtureRequest, nvidia_tools: Path, fake_library: Path) -> Iterator[dict[Key, Verdicts]]:
    """Every (source, model) the session's collected tests ask for, judged up front, two at a time."""
    wanted = sorted(
        {
            (item.callspec.params["source"], item.callspec.params["model"].key)
            for item in request.session.items
            if item.name.startswith("test_both_tools_agree") and hasattr(item, "callspec")
        }
    )
    models = {model.key: model for model in judged_models()}
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {k: pool.submit(judge_model, k[0], models[k[1]], nvidia_tools, fake_library) for k in wanted}
        yield {key: future.result() for key, future in futures.items()}


@pytest.mark.parametrize("model", judged_models(), ids=lambda model: model.key)
@pytest.mark.parametrize("source", SOURCES)
def test_both_tools_agree_on_every_config_for_the_model(
    source: str, model: GpuModel, verdicts: dict[Key, Verdicts]
) -> None:
    found = verdicts[(source, model.key)]
    assert found.pairs or source == "nvidia-default", f"{source} has no config for {model.key}"
    problems = found.lines()
    assert not problems, f"{len(problems)} problem(s) in {len(found.pairs)} pair(s):\n" + "\n".join(problems)
