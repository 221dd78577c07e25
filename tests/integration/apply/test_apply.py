"""The engine on a simulated node: convergence, idempotence, what it leaves alone, journal and logs."""

from collections.abc import Callable

from structlog.testing import capture_logs

from migagent.planning import StepKind
from migagent.reconcile.assertion import config_mismatches
from migagent.reconcile.journal import MemoryJournal, desired_node_hash
from migagent.reconcile.machine import ApplyEngine, ApplyOutcome
from migagent.reconcile.states import Phase
from migagent_sim.doubles.intercept import InterceptingDriver
from tests.integration.apply.support import SimNode

MakeNode = Callable[[str], SimNode]


def test_an_apply_converges_and_the_layout_then_asserts_as_applied(make_node: MakeNode) -> None:
    node = make_node("2xA100-40GB")
    result = node.apply("a100-balanced")
    assert result.outcome is ApplyOutcome.CONVERGED
    assert result.error is None
    assert config_mismatches(node.observe(), node.desired("a100-balanced")) == ()
    record = node.journal().load()
    assert record is not None
    assert record.phase is Phase.CONVERGED
    assert record.attempts == 0


def test_a_second_apply_of_the_same_layout_performs_no_operations(make_node: MakeNode) -> None:
    node = make_node("2xA100-40GB")
    node.apply("a100-balanced")
    node.fake.sim_mutations = []
    result = node.apply("a100-balanced")
    assert result.converged
    assert result.steps_run == ()
    assert node.fake.sim_mutations == []


def test_changing_one_gpu_leaves_the_other_gpus_mig_devices_untouched(make_node: MakeNode) -> None:
    node = make_node("2xA100-40GB")
    node.apply("a100-balanced")
    untouched = node.mig_uuids(1)
    result = node.apply("a100-gpu0-1g")
    assert result.converged
    assert {step.gpu for step in result.steps_run} == {0}
    assert node.mig_uuids(1) == untouched


def test_a_gi_that_the_new_layout_keeps_keeps_its_mig_uuid(make_node: MakeNode) -> None:
    node = make_node("H100-80GB-SXM")
    node.apply("h100-2x3g")
    before = node.mig_uuids(0)
    result = node.apply("h100-3g-2g-1g")
    assert result.converged
    after = node.mig_uuids(0)
    assert len(before & after) == 1
    destroyed = [s for s in result.steps_run if s.kind is StepKind.DESTROY_GI]
    assert len(destroyed) == 1


def test_gpus_the_layout_does_not_select_are_not_touched(make_node: MakeNode) -> None:
    node = make_node("8xH100-80GB-SXM")
    node.apply("h100-gpu5-on")
    node.fake.sim_mutations = []
    result = node.apply("h100-gpu2-on-gpu5-off")
    assert result.converged
    assert {step.gpu for step in result.steps_run} == {2, 5}
    observation = node.observe()
    assert [g.index for g in observation.gpus if g.mig_current] == [2]


def test_mig_can_be_switched_off_again(make_node: MakeNode) -> None:
    node = make_node("2xA100-40GB")
    node.apply("a100-balanced")
    result = node.apply("all-disabled")
    assert result.converged
    assert all(not g.mig_current and not g.mig_pending for g in node.observe().gpus)
    assert all(not g.gpu_instances for g in node.observe().gpus)


def test_an_ampere_mode_change_sets_the_mode_then_resets_only_that_gpu(make_node: MakeNode) -> None:
    node = make_node("A100-40GB")
    result = node.apply("all-enabled")
    assert result.converged
    assert [s.kind for s in result.steps_run] == [StepKind.SET_MODE, StepKind.RESET_GPU]
    assert node.fake.sim_mutations == ["nvmlDeviceSetMigMode", "sim_reset_gpu"]


def test_the_journal_says_which_step_is_about_to_run_before_it_touches_the_gpu(make_node: MakeNode) -> None:
    node = make_node("A100-40GB")
    journal = MemoryJournal()
    seen: list[int] = []

    def record_step_index(name: str) -> None:
        record = journal.load()
        assert record is not None
        assert record.phase is Phase.APPLYING
        seen.append(record.step_index)

    driver = InterceptingDriver(node.driver, before=record_step_index)
    desired = node.desired("a100-balanced")
    engine = ApplyEngine(driver, journal, clock=node.clock, boot_id_provider=node.boot)
    result = engine.apply(desired, layout_hash=desired_node_hash(desired), config_name="a100-balanced")
    assert result.converged
    assert result.plan is not None
    assert seen == list(range(len(result.plan.steps)))


def test_steps_log_structured_events_bound_to_gpu_step_and_phase(make_node: MakeNode) -> None:
    node = make_node("A100-40GB")
    with capture_logs() as logs:
        node.apply("all-enabled")
    started = [e for e in logs if e["event"] == "step_started"]
    assert [(e["gpu"], e["phase"]) for e in started] == [(0, "applying"), (0, "applying")]
    assert started[0]["step"] == "GPU 0: set MIG on"
    assert logs[-1]["event"] == "apply_converged"
    assert all(e["event"].islower() and " " not in e["event"] for e in logs)
