"""A rollout on a simulated pool: waves within --max-unavailable GPUs, every PDB respected, and each
node evicting exactly the pods its agent's report predicted."""

from __future__ import annotations

from collections.abc import Callable

from migagent.node.names import MIG_CONFIG_LABEL
from migagent.rollout.state import NodeStatus, Phase
from migagent_sim.pool import PoolMonitor, ReplicaScheduler, SimPool, SimPoolConfig
from tests.integration.rollout.support import TARGET, Recorder, create, drive, spec, wait_reported

WORKLOADS = (
    ("gpu-h100-1", "train-0", 0, 0, {"app": "train"}),
    ("gpu-h100-2", "train-1", 0, 4, {"app": "train"}),
    ("gpu-h100-2", "train-2", 1, 5, {"app": "train"}),
    ("gpu-h100-3", "train-3", 1, 1, {"app": "train"}),
    ("gpu-h100-4", "batch-0", 0, 6, {"app": "batch"}),
)


def test_gpus_out_of_service_never_exceed_max_unavailable_and_each_node_evicts_what_was_predicted(
    make_pool: Callable[..., SimPool],
) -> None:
    pool = make_pool(SimPoolConfig(nodes=4))
    pool.run_workloads(WORKLOADS)
    wait_reported(pool, [(node, f"ml/{pod}") for node, pod, *_ in WORKLOADS])
    monitor = PoolMonitor(pool)
    recorder = Recorder()
    create(pool, "r", spec(pool, max_unavailable="4"))

    final = drive(pool, "r", recorder)

    assert final.phase is Phase.DONE
    assert 0 < monitor.max_unavailable_gpus <= 4
    assert max(len(wave) for wave in recorder.waves()) == 2  # the budget was used
    assert monitor.relabels == dict.fromkeys(pool.nodes, 1)
    evicted = set()
    for record in final.nodes.values():
        assert record.status is NodeStatus.DONE
        assert set(record.predicted) == set(record.evicted), record.node
        evicted |= set(record.evicted)
        assert pool.labels(record.node)[MIG_CONFIG_LABEL] == TARGET
    assert evicted  # the check above is not vacuous
    running = {f"ml/{w.name}" for node in pool.nodes.values() for w in node.kubelet.workloads()}
    assert running == {f"ml/{pod}" for _, pod, *_ in WORKLOADS} - evicted


def test_max_unavailable_in_nodes_takes_one_node_at_a_time(make_pool: Callable[..., SimPool]) -> None:
    pool = make_pool(SimPoolConfig(nodes=3))
    wait_reported(pool)
    monitor = PoolMonitor(pool)
    recorder = Recorder()
    create(pool, "r", spec(pool, max_unavailable="1nodes"))

    assert drive(pool, "r", recorder).phase is Phase.DONE
    assert [len(wave) for wave in recorder.waves()] == [1, 1, 1]
    assert monitor.max_unavailable_gpus == 2  # one 2-GPU node at a time


def test_two_nodes_of_one_wave_never_drain_one_pdb_past_its_budget(make_pool: Callable[..., SimPool]) -> None:
    """Inference replicas on two nodes share a PDB allowing one disruption; the budget would take both
    nodes at once, so only the PDB check keeps them in separate waves (no eviction is ever refused)."""
    pool = make_pool(SimPoolConfig(nodes=3))
    replicas = (("gpu-h100-2", "inference-0", 0, 4, {"app": "inference"}),
                ("gpu-h100-3", "inference-1", 1, 5, {"app": "inference"}))
    pool.run_workloads(replicas)
    pool.api.add_managed_pdb("ml", "inference-pdb", match_labels={"app": "inference"}, min_available=1)
    wait_reported(pool, [(node, f"ml/{pod}") for node, pod, *_ in replicas])
    recorder = Recorder()
    create(pool, "r", spec(pool, max_unavailable="4"))

    with ReplicaScheduler(pool, [(node, pod, labels) for node, pod, _, _, labels in replicas]):
        final = drive(pool, "r", recorder)

    assert final.phase is Phase.DONE
    assert final.nodes["gpu-h100-2"].wave != final.nodes["gpu-h100-3"].wave
    held_back = [str(reason) for wave in recorder.named("wave_started") for reason in wave["held_back"]]  # type: ignore[attr-defined]
    assert any("PodDisruptionBudget ml/inference-pdb allows 1 disruption(s), the wave would evict 2" in r
               for r in held_back), held_back
    refused = [r for r in pool.api.requests if r.subresource == "eviction" and r.status == 429]
    assert refused == []
    assert {r.node: r.evicted for r in final.nodes.values() if r.evicted} == {
        "gpu-h100-2": ("ml/inference-0",), "gpu-h100-3": ("ml/inference-1",)
    }
