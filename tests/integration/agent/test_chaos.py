"""A few of the chaos suite's scenarios (bench/chaos.py) with small bounds: counts, never times."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos import PERSISTENT, run_flip, run_kills, run_persistent
from migagent.attempt.listener import AgentPhase

REFUSED_UP_FRONT = ("two-pdbs-one-pod", "minavailable-50%-of-1", "strategy-mismatch", "host-process-on-gi")


@pytest.mark.parametrize("name", REFUSED_UP_FRONT)
def test_a_persistent_failure_the_gate_finds_never_cordons_nor_evicts(tmp_path: Path, name: str) -> None:
    scenario = next(s for s in PERSISTENT if s.name == name)
    result = run_persistent(tmp_path, scenario, scale=600.0, window_s=1.0)
    assert result.cordons == 0
    assert sum(result.evictions.values()) == 0
    assert result.attempts >= 1, "the agent never even tried"


def test_an_agent_killed_at_random_instants_of_changes_always_converges_and_evicts_no_pod_twice(
    tmp_path: Path,
) -> None:
    report = run_kills(tmp_path, kills=4, seed=3, scale=600.0)
    assert report.converged == report.changes == 4
    assert report.evicted_twice == 0
    assert report.kills >= 1
    assert report.cordon_episodes <= report.changes, "a restarted agent cordoned again instead of adopting"


def test_a_label_typo_as_the_apply_starts_leaves_every_gpu_consistent_and_the_fix_converges(tmp_path: Path) -> None:
    _, _, consistent, cordoned, honest, fixed = run_flip(tmp_path, AgentPhase.APPLY, "all-balancedd", scale=600.0)
    assert (consistent, cordoned, honest, fixed) == ("yes", "no", "yes", "yes")
