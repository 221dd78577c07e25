"""The gate plans again only for pods: with no pod on a GPU instance, the plan it is handed is the one
the attempt applies (planned once); with a pod on one the first plan destroys, the plan that keeps it."""

from __future__ import annotations

from pathlib import Path

from migagent.attempt.drain.gate import Target, plan_and_gate
from migagent.attempt.reads import AttemptReads
from migagent.planning import plan
from migagent_sim.doubles.memory_node import MemoryNode


def _target(node: MemoryNode, name: str) -> Target:
    reads = AttemptReads(
        name, config_file=node.layout_file, observe=node.driver.observe, list_pods=node.kube.list_pods_on_node
    )
    observation = reads.observation()
    return Target(name, reads.desired(), observation, plan(observation, reads.desired()))


def test_with_no_pod_on_a_gpu_instance_the_gate_keeps_the_plan_it_was_given(tmp_path: Path) -> None:
    node = MemoryNode(tmp_path)
    target = _target(node, "all-balanced")

    gated = plan_and_gate(node.kube, node.pod_resources, target, force_delete=False)

    assert gated.steps is target.steps, "the gate planned again though no pod holds a GPU instance"
    assert gated.evict == ()


def test_a_pod_on_a_gpu_instance_the_first_plan_destroys_is_planned_around(tmp_path: Path) -> None:
    node = MemoryNode(tmp_path)
    target = _target(node, "all-balanced")
    # The 3g goes at 4:4 either way, so a 1g below slot 4 can be kept by moving the 2g.
    doomed = next(gi for gi in target.steps.gpus[0].destroy if gi.placement.start < 4)
    node.gpu_pod("busy", gpu=0, slot=doomed.placement.start)

    gated = plan_and_gate(node.kube, node.pod_resources, target, force_delete=False)

    assert doomed.placement in {gi.placement for gi in gated.steps.gpus[0].keep}
    assert gated.evict == ()
