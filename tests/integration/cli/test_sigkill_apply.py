"""SIGKILL a real `migagent apply --simulate ... --state ...` process mid-apply; one more apply must finish.

The simulated node is saved after every mutating NVML call, so a killed process leaves the GPUs as
real ones would be. The kill points are the instants right after a mutating call was persisted and
before the process could journal it (MIGAGENT_SIM_SIGKILL_AFTER_MUTATIONS=N), plus a seeded set of
wall-clock delays that land anywhere. The next single apply must succeed, the node must match the
layout, and the GPU and compute instances destroyed over both runs must be exactly the plan's.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from migagent.cli.node import SIGKILL_AFTER_MUTATIONS_ENV
from tests.integration.apply.support import LAYOUTS

MAIN = "import sys; from migagent.cli import main; sys.exit(main())"
# Kill points in the 14-step a100-balanced -> a100-1g apply: between the CI and GI destroys, after the
# last destroy, mid-creation (every mutation is covered in-process by tests/integration/apply/test_crash).
KILL_AFTER_MUTATIONS = (2, 5, 9)
SEEDED_DELAYS_S = tuple(round(random.Random(10).uniform(0.5, 4.0), 2) for _ in range(1))


@dataclass(frozen=True)
class Node:
    """A simulated node on disk: its state file (the journal lies beside it) and the layout file."""

    state: Path
    layouts: Path

    def argv(self, verb: str, config: str, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-c",
            MAIN,
            verb,
            "-f",
            str(self.layouts),
            "-c",
            config,
            "--state",
            str(self.state),
            *extra,
        ]

    def run(
        self, verb: str, config: str, *extra: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(verb, config, *extra),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env={**os.environ, **(env or {})},
        )

    def gpus(self) -> list[dict[str, Any]]:
        gpus: list[dict[str, Any]] = json.loads(self.state.read_text())["gpus"]
        return gpus


def _copy_node(source: Node, directory: Path) -> Node:
    directory.mkdir()
    state = directory / source.state.name
    shutil.copy(source.state, state)
    journal = source.state.with_name(f"{source.state.name}.journal")
    if journal.exists():
        shutil.copytree(journal, state.with_name(f"{state.name}.journal"))
    return Node(state=state, layouts=source.layouts)


@pytest.fixture(scope="module")
def balanced_node(tmp_path_factory: pytest.TempPathFactory) -> Node:
    """An A100-40GB with a100-balanced applied (two 1g GIs that a100-1g keeps, a 2g and a 3g it destroys)."""
    directory = tmp_path_factory.mktemp("balanced")
    layouts = directory / "layouts.yaml"
    layouts.write_text(LAYOUTS)
    node = Node(state=directory / "node.json", layouts=layouts)
    created = node.run("apply", "a100-balanced", "--simulate", "A100-40GB")
    assert created.returncode == 0, created.stderr
    return node


def _instances(gpu: dict[str, Any]) -> dict[tuple[int, tuple[int, int]], frozenset[str]]:
    """(GI profile, placement) -> the UUIDs of its CIs: a recreated GI has new CI UUIDs."""
    return {
        (gi["profile_id"], tuple(gi["placement"])): frozenset(ci["uuid"] for ci in gi["compute_instances"])
        for gi in gpu["gpu_instances"]
    }


def _check_one_apply_finishes(node: Node, before: list[dict[str, Any]], planned: dict[str, int], where: str) -> None:
    resumed = node.run("apply", "a100-1g")
    assert resumed.returncode == 0, f"{where}: {resumed.stdout}{resumed.stderr}"
    asserted = node.run("assert", "a100-1g")
    assert asserted.returncode == 0, f"{where}: {asserted.stderr}"
    (start,), (end,) = before, node.gpus()
    old, new = _instances(start), _instances(end)
    kept = {key for key, cis in old.items() if new.get(key) == cis}
    destroyed_cis = sum(len(cis) for key, cis in old.items() if key not in kept)
    assert len(old) - len(kept) == planned["destroy-gi"], where
    assert destroyed_cis == planned["destroy-ci"], where
    # Every CI ever created takes a new MIG UUID serial: none was created (so destroyed) twice.
    assert end["mig_uuid_serial"] - start["mig_uuid_serial"] == planned["create-ci"], where


def _planned_counts(node: Node) -> dict[str, int]:
    shown = node.run("plan", "a100-1g", "--output", "json")
    assert shown.returncode == 0, shown.stderr
    counts: dict[str, int] = {}
    for step in json.loads(shown.stdout)["steps"]:
        counts[step["kind"]] = counts.get(step["kind"], 0) + 1
    return counts


@pytest.fixture(scope="module")
def planned(balanced_node: Node) -> dict[str, int]:
    return _planned_counts(balanced_node)


def test_the_plan_killed_into_has_destroys_and_creates(planned: dict[str, int]) -> None:
    assert planned == {"destroy-ci": 2, "destroy-gi": 2, "create-gi": 5, "create-ci": 5}
    assert max(KILL_AFTER_MUTATIONS) < sum(planned.values())


@pytest.mark.parametrize("mutations", KILL_AFTER_MUTATIONS)
def test_sigkill_right_after_a_persisted_nvml_call_is_finished_by_one_more_apply(
    balanced_node: Node, planned: dict[str, int], tmp_path: Path, mutations: int
) -> None:
    node = _copy_node(balanced_node, tmp_path / "node")
    before = node.gpus()

    killed = node.run("apply", "a100-1g", env={SIGKILL_AFTER_MUTATIONS_ENV: str(mutations)})

    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    _check_one_apply_finishes(node, before, planned, f"killed after mutation {mutations}")


@pytest.mark.parametrize("delay_s", SEEDED_DELAYS_S)
def test_sigkill_at_a_seeded_random_instant_is_finished_by_one_more_apply(
    balanced_node: Node, planned: dict[str, int], tmp_path: Path, delay_s: float
) -> None:
    node = _copy_node(balanced_node, tmp_path / "node")
    before = node.gpus()

    process = subprocess.Popen(node.argv("apply", "a100-1g"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        process.wait(timeout=delay_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait()

    _check_one_apply_finishes(node, before, planned, f"killed {delay_s}s after start")


def test_sigkill_between_the_ampere_mode_change_and_its_reset_is_finished_by_one_more_apply(tmp_path: Path) -> None:
    layouts = tmp_path / "layouts.yaml"
    layouts.write_text(LAYOUTS)
    node = Node(state=tmp_path / "node.json", layouts=layouts)

    killed = node.run("apply", "a100-balanced", "--simulate", "A100-40GB", env={SIGKILL_AFTER_MUTATIONS_ENV: "1"})

    assert killed.returncode == -signal.SIGKILL
    (gpu,) = node.gpus()
    assert (gpu["mig_current"], gpu["mig_pending"]) == (0, 1)  # the set-mode call was kept on disk
    resumed = node.run("apply", "a100-balanced")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert node.run("assert", "a100-balanced").returncode == 0
