"""The `migagent rollout` command lines against a simulated pool: plan, start, status, pause, resume."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest

from migagent.cli import main
from migagent.plumbing.logging import configure_logging
from migagent.rollout.reports import AgentAnswer, answer
from migagent_sim.cluster import DEMO_LAYOUTS
from migagent_sim.pool import SimPool, SimPoolConfig
from tests.integration.rollout.support import TARGET, api, wait_reported
from tests.waiting import eventually

LAYOUTS = DEMO_LAYOUTS + """\
  too-many-3g:
    - devices: all
      mig-enabled: true
      mig-devices:
        "3g.40gb": 3
"""
WORKLOADS = (
    ("gpu-h100-1", "train-0", 0, 4, {"app": "train"}),
    ("gpu-h100-2", "train-1", 1, 0, {"app": "train"}),
)


@pytest.fixture
def pool(make_pool: Callable[..., SimPool]) -> SimPool:
    configure_logging(level=logging.WARNING)  # as `migagent` does: to stderr, so stdout is the command's own
    started = make_pool(SimPoolConfig(nodes=2, layouts_yaml=LAYOUTS))
    started.run_workloads(WORKLOADS)
    wait_reported(started, [(node, f"ml/{pod}") for node, pod, *_ in WORKLOADS])
    started.api.add_node("gpu-h100-new", labels={"pool": "h100"})  # no agent has reported it yet
    return started


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> object:
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_plan_shows_each_nodes_change_the_waves_the_totals_and_the_capacity(
    pool: SimPool, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _json(capsys, ["rollout", "plan", "-l", pool.selector, "-c", TARGET, "-o", "json",
                            "--max-unavailable", "2", "--api-server", pool.api.url])
    assert isinstance(result, dict)
    nodes = {node["node"]: node for node in result["nodes"]}
    assert nodes["gpu-h100-1"]["evicts"] == ["ml/train-0"]  # its GI at slot 4 is destroyed
    assert nodes["gpu-h100-2"]["evicts"] == []  # its GI at slot 0 is kept
    assert nodes["gpu-h100-1"]["gpus_changed"] == [0, 1]
    assert (nodes["gpu-h100-1"]["gis_kept"], nodes["gpu-h100-1"]["gis_destroyed"]) == (4, 10)
    assert nodes["gpu-h100-new"]["problem"].startswith("no agent has reported")
    assert result["waves"] == [["gpu-h100-2"], ["gpu-h100-1"]]  # the canary evicts nothing
    assert result["totals"]["pods_evicted"] == 1
    assert result["totals"]["nodes_problem"] == 1
    capacity = result["capacity"]
    assert capacity["before"] == {"nvidia.com/mig-1g.10gb": 28}
    assert capacity["after"] == {"nvidia.com/mig-1g.10gb": 8, "nvidia.com/mig-2g.20gb": 4, "nvidia.com/mig-3g.40gb": 4}
    # Per resource, the least any one wave leaves: 1g.10gb while gpu-h100-1 changes (gpu-h100-2 already holds
    # all-balanced, 2 per GPU), 2g and 3g while the canary changes (nobody holds them yet).
    assert capacity["during_worst_wave"] == {
        "nvidia.com/mig-1g.10gb": 4, "nvidia.com/mig-2g.20gb": 0, "nvidia.com/mig-3g.40gb": 0
    }


def test_plan_names_the_nodes_a_layout_does_not_fit(pool: SimPool, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["rollout", "plan", "-l", pool.selector, "-c", "too-many-3g", "--api-server", pool.api.url]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("gpu-h100-")}
    assert "does not fit" in rows["gpu-h100-1"]
    assert "does not fit" in rows["gpu-h100-2"]
    assert "0 node(s) change, 0 unchanged, 3 cannot" in out


def test_a_bad_budget_or_layout_is_one_line_and_nothing_is_written(
    pool: SimPool, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["rollout", "start", "r", "-l", pool.selector, "--api-server", pool.api.url]
    capsys.readouterr()
    with pytest.raises(SystemExit) as usage:
        main([*base, "-c", TARGET, "--max-unavailable", "lots"])
    assert usage.value.code == 2
    assert main([*base, "-c", "no-such-layout"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("migagent rollout start: error: argument --max-unavailable: 'lots': give a positive")
    assert err[1] == ("migagent rollout: the migagent-layouts ConfigMap in namespace migagent: selected mig-config"
                      " not present: no-such-layout; the file holds 8 configs: all-1g.10gb, half-balanced,"
                      " all-balanced, all-7g, all-3g.40gb, all-disabled and 2 more")
    assert main([*base, "-c", "all-balancd"]) == 1  # the short line with "did you mean", as apply and validate
    assert "not present: all-balancd; did you mean all-balanced or half-balanced? the file" in capsys.readouterr().err
    assert pool.api.config_map("migagent-rollouts", "migagent-rollout-r") is None


def test_a_rollout_that_would_change_no_node_is_refused_and_a_reused_name_must_repeat_its_flags(
    pool: SimPool, capsys: pytest.CaptureFixture[str]
) -> None:
    selector = "pool=h100,kubernetes.io/hostname!=gpu-h100-new"
    base = ["rollout", "start", "-l", selector, "--api-server", pool.api.url]
    nodes = api(pool).list_nodes
    eventually(lambda: all(answer(node, "all-1g.10gb") is AgentAnswer.SUCCESS for node in nodes(selector)),
               "both agents report all-1g.10gb applied, as a rollout reads it")
    capsys.readouterr()
    assert main([*base, "same", "-c", "all-1g.10gb"]) == 1  # where the nodes are: "done" would claim success
    assert capsys.readouterr().err == ("migagent rollout: rollout same would change no node (gpu-h100-1: already at"
                                       " the layout; gpu-h100-2: already at the layout)\n")
    assert main([*base, "unfit", "-c", "too-many-3g"]) == 1  # fits no node: no wave could run
    err = capsys.readouterr().err
    assert err.startswith("migagent rollout: rollout unfit would change no node (gpu-h100-1: ")
    assert "fit" in err
    assert pool.api.config_map("migagent-rollouts", "migagent-rollout-same") is None
    assert pool.api.config_map("migagent-rollouts", "migagent-rollout-unfit") is None
    assert main([*base, "r", "-c", TARGET, "--detach"]) == 0
    assert main([*base, "r", "-c", "all-7g", "--canary", "2", "--detach"]) == 1  # not dropped: refused, named
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"migagent rollout: rollout r exists with -c {TARGET} (not -c all-7g), --canary 1 (not --canary 2); start"
        " it with those (it resumes), or a new NAME"
    )


def test_start_then_status_from_anywhere_and_resume_of_a_finished_rollout_is_refused(
    pool: SimPool, capsys: pytest.CaptureFixture[str]
) -> None:
    server = ["--api-server", pool.api.url]
    assert main(["rollout", "start", "r", "-l", "pool=h100,kubernetes.io/hostname!=gpu-h100-new", "-c", TARGET,
                 "--max-unavailable", "2", "--poll", "0.05", "-o", "json", *server]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    summary = events[-1]
    assert summary["event"] == "summary"
    assert summary["phase"] == "done"
    assert {node: (s["predicted"], s["evicted"]) for node, s in summary["nodes"].items()} == {
        "gpu-h100-1": (["ml/train-0"], ["ml/train-0"]), "gpu-h100-2": ([], [])
    }
    state = _json(capsys, ["rollout", "status", "r", "-o", "json", *server])
    assert isinstance(state, dict)
    assert state["phase"] == "done"
    assert {name: node["previous"] for name, node in state["nodes"].items()} == dict.fromkeys(
        ["gpu-h100-1", "gpu-h100-2"], "all-1g.10gb"
    )
    assert main(["rollout", "resume", "r", *server]) == 1
    assert capsys.readouterr().err.strip() == "migagent rollout: rollout r is done: nothing to resume"
