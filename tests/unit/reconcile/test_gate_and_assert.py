"""Pure checks on hand-built observations: the safety gate, the assert comparison, step preconditions."""

import pytest

from migagent.catalog import model_by_key
from migagent.catalog.model import Placement
from migagent.errors import InUseError
from migagent.layout.desired import DesiredGi, DesiredGpu, DesiredNode
from migagent.layout.observed import Observation, ObservedCi, ObservedGi, ObservedGpu, ObservedProcess
from migagent.planning import Step, StepKind
from migagent.reconcile.assertion import config_mismatches, mode_mismatches, mode_only_target
from migagent.reconcile.executor import precondition_failure
from migagent.reconcile.safety import BlockingProcess, blocking_processes, check_nothing_in_use

A100 = model_by_key("A100-40GB")
H100 = model_by_key("H100-80GB-SXM")


def _gi(profile: int, start: int, size: int, *, gi_id: int, pids: tuple[int, ...] = ()) -> ObservedGi:
    ci = ObservedCi(
        id=0,
        profile_id=0 if profile == 19 else 2,
        placement=Placement(0, size if profile == 19 else 3),
        uuid=f"MIG-{gi_id}",
        processes=tuple(ObservedProcess(pid) for pid in pids),
    )
    return ObservedGi(id=gi_id, profile_id=profile, placement=Placement(start, size), compute_instances=(ci,))


def _gpu(index: int, *gis: ObservedGi, current: bool = True, pending: bool | None = None) -> ObservedGpu:
    return ObservedGpu(
        index=index,
        uuid=f"GPU-{index}",
        name="A100",
        pci_bus_id=f"0000:{index}:00.0",
        pci_device_id=A100.primary_pci_device_id,
        mig_capable=True,
        mig_current=current,
        mig_pending=current if pending is None else pending,
        gpu_instances=gis,
        profiles=A100.profiles,
        mode_change_needs_reset=True,
    )


def _destroy_gi(gi: ObservedGi, gpu: int = 0) -> Step:
    return Step(StepKind.DESTROY_GI, gpu, gi_profile_id=gi.profile_id, gi_placement=gi.placement)


def test_the_gate_names_processes_on_gis_the_steps_destroy() -> None:
    busy, idle = _gi(9, 4, 4, gi_id=2, pids=(11, 12)), _gi(19, 0, 1, gi_id=13)
    observation = Observation((_gpu(0, busy, idle),))
    steps = (_destroy_gi(busy), _destroy_gi(idle))
    assert blocking_processes(steps, observation) == (
        BlockingProcess(0, "MIG-2", 11),
        BlockingProcess(0, "MIG-2", 12),
    )
    with pytest.raises(InUseError, match=r"pid 11 on MIG-2 \(GPU 0\); pid 12 on MIG-2 \(GPU 0\).*nothing was changed"):
        check_nothing_in_use(steps, observation)


def test_the_gate_ignores_processes_on_gis_no_step_touches() -> None:
    busy, idle = _gi(9, 4, 4, gi_id=2, pids=(11,)), _gi(19, 0, 1, gi_id=13)
    check_nothing_in_use((_destroy_gi(idle),), Observation((_gpu(0, busy, idle),)))


def test_a_mode_change_or_reset_is_blocked_by_any_process_on_that_gpu() -> None:
    observation = Observation(
        (_gpu(0, _gi(19, 0, 1, gi_id=13, pids=(5,))), _gpu(1, _gi(19, 0, 1, gi_id=13, pids=(6,))))
    )
    for kind in (StepKind.SET_MODE, StepKind.RESET_GPU):
        steps = (Step(kind, 1, mig_enabled=False),)
        assert blocking_processes(steps, observation) == (BlockingProcess(1, "MIG-13", 6),)


def test_assert_passes_when_the_instances_match_wherever_they_are_placed() -> None:
    observation = Observation((_gpu(0, _gi(19, 5, 1, gi_id=1), _gi(9, 0, 4, gi_id=2)),))
    desired = DesiredNode((DesiredGpu(0, True, (DesiredGi(9, (2,)), DesiredGi(19, (0,)))),))
    assert config_mismatches(observation, desired) == ()


def test_assert_reports_a_pending_mode_and_a_missing_gpu() -> None:
    observation = Observation((_gpu(0, current=False, pending=True),))
    desired = DesiredNode((DesiredGpu(0, True), DesiredGpu(3, False)))
    reasons = mode_mismatches(observation, desired)
    assert reasons[0] == "GPU 0 (A100): MIG mode is disabled, pending enabled; the layout wants it enabled"
    assert reasons[1] == "GPU 3: selected by the layout but not present on this node"


def test_assert_names_what_the_gpu_has_and_what_the_layout_wants() -> None:
    observation = Observation((_gpu(0, _gi(9, 4, 4, gi_id=2)),))
    desired = DesiredNode((DesiredGpu(0, True, (DesiredGi(19, (0,)),)),))
    assert config_mismatches(observation, desired) == ("GPU 0 (A100): has 3g.20gb x1; the layout wants 1g.5gb x1",)


def test_the_mode_only_target_skips_gpus_in_the_right_mode_and_keeps_instances_when_only_pending_differs() -> None:
    kept = _gi(19, 0, 1, gi_id=13)
    observation = Observation((_gpu(0), _gpu(1, kept, pending=False), _gpu(2, current=False)))
    desired = DesiredNode(tuple(DesiredGpu(i, True, (DesiredGi(9, (2,)),)) for i in range(3)))
    assert mode_only_target(observation, desired) == DesiredNode(
        (DesiredGpu(1, True, (DesiredGi(19, (0,)),)), DesiredGpu(2, True))
    )


def test_creating_a_gi_on_slices_another_gi_holds_fails_its_precondition() -> None:
    observation = Observation((_gpu(0, _gi(19, 4, 1, gi_id=1)),))
    step = Step(StepKind.CREATE_GI, 0, gi_profile_id=9, gi_placement=Placement(4, 4))
    assert precondition_failure(step, observation) == "GPU 0: slices 4:4 are held by GPU instance 1"


def test_creating_a_gi_with_mig_disabled_fails_its_precondition() -> None:
    step = Step(StepKind.CREATE_GI, 0, gi_profile_id=19, gi_placement=Placement(0, 1))
    reason = precondition_failure(step, Observation((_gpu(0, current=False),)))
    assert reason is not None
    assert "MIG mode is not enabled" in reason


def test_a_reset_whose_mode_is_not_pending_fails_its_precondition() -> None:
    step = Step(StepKind.RESET_GPU, 0, mig_enabled=True)
    assert precondition_failure(step, Observation((_gpu(0, current=False, pending=True),))) is None
    assert precondition_failure(step, Observation((_gpu(0, current=False, pending=False),))) is not None


def test_a_pending_mode_counts_as_set_only_where_a_reset_activates_it() -> None:
    step = Step(StepKind.SET_MODE, 0, mig_enabled=True)
    ampere = _gpu(0, current=False, pending=True)
    hopper = ObservedGpu(
        index=0,
        uuid="GPU-h",
        name="H100",
        pci_bus_id="0000:1:00.0",
        pci_device_id=H100.primary_pci_device_id,
        mig_capable=True,
        mig_current=False,
        mig_pending=True,
        profiles=H100.profiles,
    )
    assert step.is_done(Observation((ampere,)))
    assert not step.is_done(Observation((hopper,)))
