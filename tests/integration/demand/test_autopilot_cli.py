"""`migagent autopilot run|history|pause|resume` on a simulated pool, through the real client over HTTP."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from migagent.autopilot.controller import load
from migagent.autopilot.decide import OPT_IN_LABEL
from migagent.cli import main
from migagent.plumbing.logging import configure_logging
from migagent_sim.cluster import GPU_OPERATOR_LABELS
from migagent_sim.demand_pool import demand_api, running_on, scheduler, submit
from migagent_sim.pool import SimPool, SimPoolConfig
from tests.integration.demand.support import FULL_NODE, THREE_G, fill, layouts
from tests.waiting import eventually


@pytest.fixture
def pool(make_pool: Callable[..., SimPool]) -> SimPool:
    configure_logging(level=logging.WARNING)
    started = make_pool(SimPoolConfig(nodes=2, labels={**GPU_OPERATOR_LABELS, OPT_IN_LABEL: "enabled"}))
    fill(started, FULL_NODE)
    return started


def _history(pool: SimPool, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["autopilot", "history", "-o", "json", "--api-server", pool.api.url]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def _run_until(
    run: list[str], pool: SimPool, capsys: pytest.CaptureFixture[str], done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    for _ in range(20):
        assert main([*run, "--run-for", "3"]) == 0
        history = _history(pool, capsys)
        if done(history):
            return history
    raise AssertionError(f"not recorded after 20 runs: {history['history']}")


def test_paused_the_run_records_what_it_would_do_and_resumed_it_does_it(
    pool: SimPool, capsys: pytest.CaptureFixture[str]
) -> None:
    server = ["--api-server", pool.api.url]
    assert main(["autopilot", "pause", *server]) == 0
    assert "autopilot paused" in capsys.readouterr().out
    waiting = [submit(pool, "train-0", THREE_G)]
    before = layouts(pool)
    run = ["autopilot", "run", "--persist", "0.5", "--poll", "0.2", *server]
    with scheduler(pool):
        # Runs of a few seconds, again until what is awaited is recorded: on a loaded machine one run may
        # end before its first look (or mid-rollout); the history is stored, so a run repeats nothing.
        history = _run_until(run, pool, capsys, lambda h: bool(h["history"]))
        assert layouts(pool) == before
        assert history["paused"] is True
        (held,) = history["history"]
        assert held["verdict"] == "held"
        assert held["reasons"] == ["paused (migagent autopilot resume)"]
        assert main(["autopilot", "resume", *server]) == 0
        _run_until(run, pool, capsys, lambda h: "rollout-done" in [d["verdict"] for d in h["history"]])
        eventually(lambda: bool(running_on(pool, waiting)), "the waiting pod runs")
    verdicts = [d["verdict"] for d in _history(pool, capsys)["history"]]
    assert verdicts == ["held", "changed", "rollout-done"]
    capsys.readouterr()
    assert main(["autopilot", "history", *server]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "autopilot: active"
    assert "  reason: paused (migagent autopilot resume)" in text
    assert load(demand_api(pool)).rollout is None


def _not_the_pools_log_lines(stderr: str) -> list[str]:
    """The CLI configures logging for the process, so the pool's agents, which run in this process too,
    log into the same stderr: JSON lines naming their node, or the simulator's logger."""
    return [line for line in stderr.splitlines() if not _from_the_pool(line)]


def _from_the_pool(line: str) -> bool:
    try:
        event = json.loads(line)
    except ValueError:
        return False
    return isinstance(event, dict) and ("node" in event or str(event.get("logger", "")).startswith("migagent_sim"))


def test_an_unreadable_state_is_one_line_and_exit_1_for_every_command_and_the_run_ends_at_once(
    pool: SimPool, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hand edit that broke the autopilot's object: no command guesses past it, and a run does not
    wait out its --run-for (its timer is gone when it returns)."""
    demand_api(pool).write_autopilot({"state": "[" * 100_000}, "")  # nested deeper than json.loads recurses
    server = ["--api-server", pool.api.url]
    capsys.readouterr()
    for command in (["history"], ["pause"], ["run", "--run-for", "600"]):
        assert main(["autopilot", *command, *server]) == 1, command
        said, *others = _not_the_pools_log_lines(capsys.readouterr().err)
        assert not others, others
        assert said.startswith("migagent autopilot: the autopilot's state (configmap "), said
        assert "key 'state') cannot be read: JSON nested deeper than the decoder allows; repair it with" in said
    assert not [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
