"""`migagent rollout start` killed mid-wave (SIGKILL: no cleanup, its lease left behind) and started
again: a second driver cannot take over while the lease runs, then resumes and finishes with each
node relabelled exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable

from migagent.cli import main
from migagent.kube.rollout_api import state_object_name
from migagent.node.names import MIG_CONFIG_LABEL, ROLLOUT_NAMESPACE
from migagent.rollout.state import NodeStatus, Phase
from migagent_sim.deadline import Deadline
from migagent_sim.pool import PoolMonitor, SimPool, SimPoolConfig
from tests.integration.rollout.support import CLOCK, TARGET, api, wait_reported

LEASE_S = 30.0
"""Long enough that the lease left by the kill still runs when the second `start` tries, however
loaded the machine. A driver renews its lease once half of it is left, so at the kill between half
and all of it runs on: at 15 s, a loaded CI run reached that `start` after the lease had expired."""


def _state(pool: SimPool) -> dict[str, object] | None:
    configmap = pool.api.config_map(ROLLOUT_NAMESPACE, state_object_name("r"))
    return None if configmap is None else json.loads(configmap["data"]["state"])


def _in_flight(pool: SimPool) -> list[str]:
    state = _state(pool) or {"nodes": {}}
    nodes = state["nodes"]
    assert isinstance(nodes, dict)
    return [name for name, record in nodes.items() if record["status"] == NodeStatus.IN_FLIGHT]


def test_killing_start_mid_wave_and_starting_again_finishes_with_each_node_relabelled_once(
    make_pool: Callable[..., SimPool], capsys: object
) -> None:
    # A slow device plugin makes each node's change last a second or more, so the kill lands mid-wave.
    pool = make_pool(SimPoolConfig(nodes=4, plugin_lag_s=1.0))
    wait_reported(pool)
    monitor = PoolMonitor(pool)
    command = ["rollout", "start", "r", "-l", pool.selector, "-c", TARGET, "--api-server", pool.api.url,
               "--max-unavailable", "4", "--lease", str(LEASE_S), "--poll", "0.05", "-o", "json"]
    with subprocess.Popen([sys.executable, "-m", "migagent", *command], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"}) as child:
        try:
            deadline = Deadline(60.0)
            while not deadline.passed() and not (_in_flight(pool) and (_state(pool) or {}).get("waves") == 2):
                assert child.poll() is None, child.communicate()
                CLOCK.sleep(0.02)
            assert _in_flight(pool), "the second wave never started"
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.communicate(timeout=10)
    killed_state = _state(pool)
    assert killed_state is not None
    assert killed_state["holder"] is not None  # killed: the lease was not released
    expires = killed_state["holder_expires"]
    assert isinstance(expires, float)
    assert expires - CLOCK.wall() > 2.0, f"the killed driver's lease had {expires - CLOCK.wall():.1f}s left"

    # While the lease runs, another `start` may not drive it.
    assert main(command) == 1
    assert "is driven by" in capsys.readouterr().err  # type: ignore[attr-defined]

    # Once it has run out (and not a fixed wait after: up to half the lease has gone by at the kill).
    CLOCK.sleep(max(0.0, expires - CLOCK.wall()) + 0.5)
    assert main(command) == 0

    stored = api(pool).read_state("r")
    assert stored is not None
    final = json.loads(stored.data["state"])
    assert final["phase"] == Phase.DONE
    assert {name: record["status"] for name, record in final["nodes"].items()} == dict.fromkeys(pool.nodes, "done")
    assert monitor.relabels == dict.fromkeys(pool.nodes, 1)
    assert all(pool.labels(name)[MIG_CONFIG_LABEL] == TARGET for name in pool.nodes)
    assert monitor.max_unavailable_gpus <= 4
