"""`migagent advise` and `rollout start --from-advice` on a simulated pool, through the real client over HTTP;
the scheduler stand-in binds the pending pods once a node offers what they ask."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest

from migagent.cli import main
from migagent.plumbing.logging import configure_logging
from migagent_sim.demand_pool import running_on, scheduler, submit
from migagent_sim.pool import SimPool, SimPoolConfig
from tests.integration.demand.support import FULL_NODE, THREE_G, fill, layouts
from tests.waiting import eventually


@pytest.fixture
def pool(make_pool: Callable[..., SimPool]) -> SimPool:
    configure_logging(level=logging.WARNING)  # as `migagent` does: to stderr, so stdout is the command's own
    started = make_pool(SimPoolConfig(nodes=3))
    fill(started, FULL_NODE)
    return started


def _out(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().out


def test_advise_names_the_change_its_price_and_where_each_pending_pod_would_run(
    pool: SimPool, capsys: pytest.CaptureFixture[str]
) -> None:
    waiting = [submit(pool, f"train-{i}", THREE_G) for i in range(2)]
    result = json.loads(_out(capsys, ["advise", "-l", pool.selector, "-o", "json", "--api-server", pool.api.url]))
    changed = [n for n in result["nodes"] if n["target"]]
    assert len(changed) == 1
    (node,) = changed
    assert node["node"] != FULL_NODE  # an idle node, not the one whose pods would have to go
    assert node["impact"]["evicts"] == []
    assert node["impact"]["capacity_after"][THREE_G] >= 2
    assert sorted(node["serves"]) == sorted(waiting)
    pods = {p["pod"]: p for p in result["pods"]}
    assert {pods[p]["node"] for p in waiting} == {node["node"]}
    assert all(pods[p]["after_change"] for p in waiting)
    assert result["totals"]["pods_evicted"] == 0
    text = _out(capsys, ["advise", "-l", pool.selector, "--api-server", pool.api.url])
    assert text.splitlines()[0].split()[:3] == ["NODE", "LAYOUT", "CHANGE"]
    row = next(line for line in text.splitlines() if line.startswith(waiting[0]))
    assert row.split()[1:] == ["0", row.split()[2], f"{THREE_G}=1", node["node"], "(after", "its", "change)"]


def test_a_rollout_from_the_advice_changes_the_node_and_the_pods_then_run_there(
    pool: SimPool, capsys: pytest.CaptureFixture[str]
) -> None:
    waiting = [submit(pool, f"train-{i}", THREE_G) for i in range(2)]
    before = layouts(pool)
    with scheduler(pool) as standin:
        out = _out(capsys, ["rollout", "start", "grow-3g", "--from-advice", "-l", pool.selector, "--poll", "0.05",
                            "-o", "json", "--api-server", pool.api.url])
        events = [json.loads(line) for line in out.splitlines()]
        assert events[-1]["event"] == "summary"
        assert events[-1]["phase"] == "done"
        after = layouts(pool)
        changed = [name for name in pool.nodes if after[name] != before[name]]
        assert len(changed) == 1
        assert changed[0] != FULL_NODE
        eventually(lambda: len(running_on(pool, waiting)) == 2, "the waiting pods run")
    assert set(running_on(pool, waiting).values()) == set(changed)
    assert {pod for pod, _, _ in standin.bound} == set(waiting)


def test_without_a_change_to_make_rollout_from_advice_says_so_and_writes_nothing(
    pool: SimPool, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code = main(["rollout", "start", "nothing", "--from-advice", "-l", pool.selector, "--api-server", pool.api.url])
    assert code == 1
    assert "the advice changes no node (0 pending pod(s), 0 unserved)" in capsys.readouterr().err
    assert pool.api.config_map("migagent", "migagent-rollout-nothing") is None
