"""Failures, halts and resumes, pause, and undo, on a simulated pool."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pynvml

from migagent.node.names import MIG_CONFIG_LABEL
from migagent.rollout.codec import decode, encode
from migagent.rollout.scope import resumed, undo_state
from migagent.rollout.state import NodeStatus, Phase
from migagent_sim.pool import PoolMonitor, SimPool, SimPoolConfig
from tests.integration.rollout.support import (
    TARGET,
    Recorder,
    api,
    create,
    drive,
    holdings,
    spec,
    wait_reported,
)

FAULTY = "gpu-h100-2"


def _break(pool: SimPool, node: str) -> None:
    pool.nodes[node].fake.sim_inject_fault(
        "nvmlDeviceCreateGpuInstanceWithPlacement", pynvml.NVML_ERROR_GPU_IS_LOST, times=None
    )


def _change(pool: SimPool, name: str, change: Callable[..., object]) -> None:
    rollout_api = api(pool)
    stored = rollout_api.read_state(name)
    assert stored is not None
    state = decode(name, stored)
    rollout_api.replace_state(name, encode(change(state)), state.resource_version)  # type: ignore[arg-type]


def test_halts_after_the_failure_budget_with_each_reason_and_resumes_to_completion_once_the_fault_is_cleared(
    make_pool: Callable[..., SimPool],
) -> None:
    pool = make_pool(SimPoolConfig(nodes=4))
    wait_reported(pool)
    _break(pool, FAULTY)
    monitor = PoolMonitor(pool)
    recorder = Recorder()
    create(pool, "r", spec(pool, max_unavailable="2", failure_budget=1))

    halted = drive(pool, "r", recorder)

    assert halted.phase is Phase.HALTED
    assert [r.node for r in halted.in_status(NodeStatus.FAILED)] == [FAULTY]
    assert len(halted.reasons) == 1
    assert halted.reasons[0].startswith(f"{FAULTY}: ")
    assert "NVML_ERROR_GPU_IS_LOST" in halted.reasons[0]
    pending = halted.in_status(NodeStatus.PENDING)
    assert pending  # the halt stopped the rollout: no wave started after the failure
    assert all(pool.labels(r.node)[MIG_CONFIG_LABEL] == "all-1g.10gb" for r in pending)
    assert [e["reasons"] for e in recorder.named("halted")] == [list(halted.reasons)]

    pool.nodes[FAULTY].fake.sim_clear_faults()
    _change(pool, "r", resumed)
    final = drive(pool, "r", recorder)

    assert final.phase is Phase.DONE
    assert {r.status for r in final.nodes.values()} == {NodeStatus.DONE}
    assert all(pool.labels(name)[MIG_CONFIG_LABEL] == TARGET for name in pool.nodes)
    assert all(pool.labels(name)["nvidia.com/mig.config.state"] == "success" for name in pool.nodes)
    assert monitor.relabels == dict.fromkeys(pool.nodes, 1)
    assert monitor.max_unavailable_gpus <= 2


def test_one_failure_under_a_failure_budget_of_two_does_not_halt(make_pool: Callable[..., SimPool]) -> None:
    pool = make_pool(SimPoolConfig(nodes=4))
    wait_reported(pool)
    _break(pool, FAULTY)
    create(pool, "r", spec(pool, max_unavailable="4", failure_budget=2))

    final = drive(pool, "r")

    assert final.phase is Phase.DONE
    assert [r.node for r in final.in_status(NodeStatus.FAILED)] == [FAULTY]
    assert final.reasons
    assert final.reasons[0].startswith(f"{FAULTY}:")
    assert [r.node for r in final.in_status(NodeStatus.DONE)] == ["gpu-h100-1", "gpu-h100-3", "gpu-h100-4"]


def test_failed_nodes_that_hold_the_whole_budget_halt_the_rollout_rather_than_stall_it(
    make_pool: Callable[..., SimPool],
) -> None:
    """A failed node stays out of service (its agent retries): with --max-unavailable one node, nothing
    else can start beside it, so the rollout halts and says why, under a failure budget not yet spent."""
    pool = make_pool(SimPoolConfig(nodes=3))
    wait_reported(pool)
    _break(pool, FAULTY)
    create(pool, "r", spec(pool, max_unavailable="2", failure_budget=2))

    final = drive(pool, "r")

    assert final.phase is Phase.HALTED
    assert final.reasons[-1] == "1 failed node(s) hold 2 of --max-unavailable 2 GPUs: no other node fits beside them"
    assert [r.node for r in final.in_status(NodeStatus.PENDING)] == ["gpu-h100-3"]


def test_pause_lets_the_wave_in_flight_finish_and_starts_no_other(make_pool: Callable[..., SimPool]) -> None:
    pool = make_pool(SimPoolConfig(nodes=3))
    wait_reported(pool)
    create(pool, "r", spec(pool, max_unavailable="2"))

    class PauseAtFirstWave(Recorder):
        def event(self, event: str, **fields: object) -> None:
            super().event(event, **fields)
            if event == "wave_started" and fields["wave"] == 1:
                _change(pool, "r", lambda state: replace(state, phase=Phase.PAUSED))

    paused = drive(pool, "r", PauseAtFirstWave())

    assert paused.phase is Phase.PAUSED
    assert [r.node for r in paused.in_status(NodeStatus.DONE)] == ["gpu-h100-1"]  # the canary finished
    assert [r.node for r in paused.in_status(NodeStatus.PENDING)] == ["gpu-h100-2", "gpu-h100-3"]
    assert pool.labels("gpu-h100-2")[MIG_CONFIG_LABEL] == "all-1g.10gb"

    _change(pool, "r", resumed)
    assert drive(pool, "r").phase is Phase.DONE


def test_undo_relabels_every_changed_node_to_its_previous_layout_within_the_same_budget(
    make_pool: Callable[..., SimPool],
) -> None:
    pool = make_pool(SimPoolConfig(nodes=3, start_layouts={"gpu-h100-3": "all-7g"}))
    wait_reported(pool)
    before = {name: holdings(pool, name) for name in pool.nodes}
    create(pool, "r", spec(pool, max_unavailable="2"))
    assert drive(pool, "r").phase is Phase.DONE
    assert all(holdings(pool, name) != before[name] for name in pool.nodes)
    monitor = PoolMonitor(pool)

    _change(pool, "r", lambda state: undo_state(state, {name: pool.labels(name).get(MIG_CONFIG_LABEL)
                                                          for name in pool.nodes}))
    undone = drive(pool, "r")

    assert undone.phase is Phase.DONE
    assert {name: pool.labels(name)[MIG_CONFIG_LABEL] for name in pool.nodes} == {
        "gpu-h100-1": "all-1g.10gb", "gpu-h100-2": "all-1g.10gb", "gpu-h100-3": "all-7g"
    }
    assert {name: holdings(pool, name) for name in pool.nodes} == before
    assert monitor.relabels == dict.fromkeys(pool.nodes, 1)
    assert monitor.max_unavailable_gpus <= 2
