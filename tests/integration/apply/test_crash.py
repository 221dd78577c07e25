"""Kill the engine at every mutation of several transitions, restart it, and check it converges.

Two crash points per mutation: before the NVML call (the journal says "about to run step i",
nothing happened), and right after NVML did it (the journal still says "about to run step i").
A fresh engine on the same journal directory and the same simulated GPUs must finish the job
without destroying anything twice: the destroy calls over both runs equal the plan's destroys.
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from structlog.testing import capture_logs

from migagent.catalog.model import Placement
from migagent.planning import StepKind
from migagent.reconcile.assertion import config_mismatches
from migagent.reconcile.states import Phase
from migagent.sim.state import SimNodeState
from migagent_sim.doubles.intercept import InterceptingDriver, SimulatedCrash, crashing_driver
from tests.integration.apply.support import SimNode

MakeNode = Callable[[str], SimNode]


@dataclass(frozen=True)
class Transition:
    spec: str
    start: str | None
    target: str


TRANSITIONS = {
    "a100-balanced-to-all-1g": Transition("A100-40GB", "a100-balanced", "a100-1g"),
    "h100-2x3g-to-3g-2g-1g": Transition("H100-80GB-SXM", "h100-2x3g", "h100-3g-2g-1g"),
    # One 3g GI is destroyed and recreated at the same placement with three 1c CIs.
    "h100-3g-recreated-with-other-cis": Transition("H100-80GB-SXM", "h100-2x3g", "h100-3g-split"),
    "mode-on-and-off-on-two-of-eight": Transition("8xH100-80GB-SXM", "h100-gpu5-on", "h100-gpu2-on-gpu5-off"),
    "ampere-mode-change-with-reset": Transition("A100-40GB", None, "a100-balanced"),
    "ampere-mig-off-with-reset": Transition("A100-40GB", "a100-balanced", "all-disabled"),
}


def _prepared(make_node: MakeNode, transition: Transition) -> SimNode:
    node = make_node(transition.spec)
    if transition.start is not None:
        assert node.apply(transition.start).converged
    node.fake.sim_mutations = []
    return node


def _mutation_count(make_node: MakeNode, transition: Transition) -> int:
    node = _prepared(make_node, transition)
    with capture_logs():
        result = node.apply(transition.target)
    assert result.converged
    return len(result.steps_run)


def _destroys(names: list[str]) -> Counter[str]:
    return Counter(n for n in names if n in ("nvmlGpuInstanceDestroy", "nvmlComputeInstanceDestroy"))


@pytest.mark.parametrize("after_call", [False, True], ids=["before-nvml-call", "after-nvml-call"])
@pytest.mark.parametrize("name", sorted(TRANSITIONS))
def test_a_crash_at_every_mutation_resumes_to_convergence_without_extra_destroys(
    make_node: MakeNode, name: str, after_call: bool
) -> None:
    transition = TRANSITIONS[name]
    total = _mutation_count(make_node, transition)
    assert total > 0
    for crash_at in range(total):
        node = _prepared(make_node, transition)
        plan = node.plan(transition.target)
        planned = Counter(step.kind for step in plan.steps)
        with capture_logs(), pytest.raises(SimulatedCrash):
            node.apply(transition.target, driver=crashing_driver(node.driver, crash_at=crash_at, after_call=after_call))
        record = node.journal().load()
        assert record is not None
        assert record.phase is Phase.APPLYING

        node.restart_process()
        with capture_logs() as logs:
            result = node.apply(transition.target)

        where = f"{name}, crash at mutation {crash_at} ({'after' if after_call else 'before'} the call)"
        assert result.converged, f"{where}: {result.error}"
        assert config_mismatches(node.observe(), node.desired(transition.target)) == (), where
        assert any(e["event"] == "journal_resumed" for e in logs), where
        destroys = _destroys(node.fake.sim_mutations)
        assert destroys["nvmlGpuInstanceDestroy"] == planned[StepKind.DESTROY_GI], where
        assert destroys["nvmlComputeInstanceDestroy"] == planned[StepKind.DESTROY_CI], where
        assert len(node.fake.sim_mutations) == total, where


def test_a_journal_from_before_a_reboot_is_not_resumed_but_planned_again(make_node: MakeNode) -> None:
    node = make_node("H100-80GB-SXM")
    with capture_logs(), pytest.raises(SimulatedCrash):
        node.apply("h100-2x3g", driver=crashing_driver(node.driver, crash_at=3, after_call=True))
    node.reboot()  # Hopper comes back with MIG disabled and no instances
    with capture_logs() as logs:
        result = node.apply("h100-2x3g")
    assert result.converged
    events = [e["event"] for e in logs]
    assert "journal_resumed" not in events
    assert "plan_computed" in events


def test_a_resumed_plan_whose_next_step_no_longer_fits_the_node_is_planned_again(make_node: MakeNode) -> None:
    node = make_node("H100-80GB-SXM")
    assert node.apply("all-enabled").converged
    with capture_logs(), pytest.raises(SimulatedCrash):
        node.apply("h100-2x3g", driver=crashing_driver(node.driver, crash_at=0, after_call=True))
    # Someone else takes the slices the journaled plan meant for its second GI.
    record = node.journal().load()
    assert record is not None
    assert record.plan is not None
    second = [s for s in record.plan.steps if s.kind is StepKind.CREATE_GI][1]
    assert second.gi_placement is not None
    node.driver.create_gpu_instance(0, profile_id=19, placement=Placement(second.gi_placement.start, 1))
    with capture_logs() as logs:
        result = node.apply("h100-2x3g")
    events = [e["event"] for e in logs]
    assert "journal_resumed" in events
    assert "replanning" in events
    assert result.converged, result.error


def _destroy_gi(node: SimNode, gpu: int, placement: Placement) -> None:
    """Someone else (another tool, an admin) removes a GI and its CIs behind the engine's back."""
    gi = node.observe().gpu(gpu).gi_at(placement)
    assert gi is not None
    for ci in gi.compute_instances:
        node.driver.destroy_compute_instance(gpu, gi_id=gi.id, ci_id=ci.id)
    node.driver.destroy_gpu_instance(gpu, gi_id=gi.id)


def test_a_journal_whose_kept_gi_has_vanished_is_planned_again_instead_of_resumed(make_node: MakeNode) -> None:
    node = make_node("A100-40GB")
    with capture_logs():
        assert node.apply("a100-balanced").converged
    kept = node.plan("a100-1g").gpus[0].keep
    assert kept
    with capture_logs(), pytest.raises(SimulatedCrash):
        node.apply("a100-1g", driver=crashing_driver(node.driver, crash_at=1, after_call=True))
    node.restart_process()
    _destroy_gi(node, 0, kept[0].placement)
    with capture_logs() as logs:
        result = node.apply("a100-1g")
    events = [e["event"] for e in logs]
    assert result.converged, result.error
    assert "journal_stale" in events
    assert "journal_resumed" not in events
    assert config_mismatches(node.observe(), node.desired("a100-1g")) == ()


def test_a_gi_destroyed_by_someone_else_during_the_apply_is_recreated_after_one_re_plan(make_node: MakeNode) -> None:
    node = make_node("A100-40GB")
    with capture_logs():
        assert node.apply("a100-balanced").converged
    kept = node.plan("a100-1g").gpus[0].keep
    assert kept
    calls = 0

    def meddle(name: str) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:  # right after the second mutation, mid-plan
            _destroy_gi(node, 0, kept[0].placement)

    with capture_logs() as logs:
        result = node.apply("a100-1g", driver=InterceptingDriver(node.driver, after=meddle))
    assert result.converged, result.error
    assert [e["event"] for e in logs].count("replanning") == 1
    assert config_mismatches(node.observe(), node.desired("a100-1g")) == ()


def test_a_node_that_moved_behind_its_journal_is_re_planned_in_the_same_run_with_only_the_plans_destroys(
    make_node: MakeNode,
) -> None:
    # The GPU goes backwards under the journal (an admin's rollback, a driver reload, a simulator that
    # forgot): the journal says the CI destroys are done, the node still has those CIs.
    node = make_node("A100-40GB")
    with capture_logs():
        assert node.apply("a100-balanced").converged
    before = SimNodeState.from_dict(node.fake.state.to_dict())
    planned = Counter(step.kind for step in node.plan("a100-1g").steps)
    assert planned[StepKind.DESTROY_CI] >= 2
    with capture_logs(), pytest.raises(SimulatedCrash):
        node.apply("a100-1g", driver=crashing_driver(node.driver, crash_at=2, after_call=True))
    record = node.journal().load()
    assert record is not None
    assert record.step_index == 2

    node.fake.state = before  # everything the crashed run did is gone; its journal is not
    node.fake.sim_mutations = []
    node.restart_process()
    with capture_logs() as logs:
        result = node.apply("a100-1g")

    events = [e["event"] for e in logs]
    assert result.converged, result.error
    assert "journal_disagrees_with_node" in events
    assert "journal_resumed" not in events
    destroys = _destroys(node.fake.sim_mutations)
    assert destroys["nvmlComputeInstanceDestroy"] == planned[StepKind.DESTROY_CI]
    assert destroys["nvmlGpuInstanceDestroy"] == planned[StepKind.DESTROY_GI]
    assert config_mismatches(node.observe(), node.desired("a100-1g")) == ()
