from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migagent.catalog import all_models, model_by_key
from migagent.catalog.model import GpuModel, Placement
from migagent.errors import LayoutDoesNotFitError
from migagent.layout.desired import DesiredGi, DesiredGpu, DesiredNode
from migagent.layout.observed import Observation
from migagent.planning import empty_observation, plan
from migagent.planning.solver import closest_fitting, default_gi
from migagent.planning.steps import STEP_ORDER, StepKind
from tests.unit.planning.brute import brute_fits, brute_largest_fitting_size, brute_max_kept
from tests.unit.planning.simulate import apply_all, desired_of, gi_multiset, with_process
from tests.unit.planning.simulate import fitting_multisets as enumerate_fitting_multisets

MODELS = all_models()
A100 = model_by_key("A100-40GB")
H100 = model_by_key("H100-80GB-SXM")
T = A100.profiles  # profile ids are the same on every 8-slice model: 19 1g, 20 1g+me, 15 1g-double, 14 2g, 9 3g ...


def _gis(*pairs: tuple[int, int]) -> tuple[DesiredGi, ...]:
    return tuple(default_gi(T, profile_id) for profile_id, count in pairs for _ in range(count))


ALL_BALANCED = _gis((9, 1), (14, 1), (19, 2))
ALL_1G = _gis((19, 7))


def _node(layouts: Mapping[int, tuple[DesiredGi, ...] | None]) -> DesiredNode:
    """GPU index -> its GIs (MIG on), or None for MIG off."""
    return DesiredNode(
        gpus=tuple(
            DesiredGpu(index=i, mig_enabled=gis is not None, gpu_instances=gis or ()) for i, gis in layouts.items()
        )
    )


def _built(observation: Observation, desired: DesiredNode) -> Observation:
    return apply_all(observation, plan(observation, desired).steps, ampere_activates=True)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.key)
def test_every_fitting_multiset_is_planned_from_an_empty_gpu_with_legal_steps(model: GpuModel) -> None:
    empty = empty_observation([model])
    for gis in enumerate_fitting_multisets(model.profiles):
        result = plan(empty, _node({0: gis}))
        assert {step.kind for step in result.steps} <= {StepKind.CREATE_GI, StepKind.CREATE_CI}
        after = apply_all(empty, result.steps)  # re-checks every placement and is_done per step
        assert gi_multiset(after.gpu(0)) == sorted(gis)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.key)
def test_one_instance_more_than_a_fitting_layout_is_planned_exactly_when_brute_force_finds_room(
    model: GpuModel,
) -> None:
    table, empty = model.profiles, empty_observation([model])
    refused = 0
    for base in enumerate_fitting_multisets(table):
        for extra in table.gi_profiles:
            candidate = (*base, default_gi(table, extra.id))
            if brute_fits(table, [gi.profile_id for gi in candidate]):
                assert gi_multiset(apply_all(empty, plan(empty, _node({0: candidate})).steps).gpu(0)) == sorted(
                    candidate
                )
            else:
                with pytest.raises(LayoutDoesNotFitError, match=r"^GPU 0 \(.*closest layout that fits: "):
                    plan(empty, _node({0: candidate}))
                refused += 1
    assert refused > 0


@settings(max_examples=150, deadline=None)
@given(model=st.sampled_from(MODELS), data=st.data())
def test_any_multiset_is_refused_exactly_when_brute_force_finds_no_packing(
    model: GpuModel, data: st.DataObject
) -> None:
    table = model.profiles
    counts = [data.draw(st.integers(0, p.max_instances + 1)) for p in table.gi_profiles]
    desired = tuple(default_gi(table, p.id) for p, n in zip(table.gi_profiles, counts, strict=True) for _ in range(n))
    empty = empty_observation([model])
    if brute_fits(table, [gi.profile_id for gi in desired]):
        assert not plan(empty, _node({0: desired})).is_empty or not desired
        return
    with pytest.raises(LayoutDoesNotFitError):
        plan(empty, _node({0: desired}))
    closest = closest_fitting(table, desired)
    assert not Counter(closest) - Counter(desired)
    assert brute_fits(table, [gi.profile_id for gi in closest])
    assert len(closest) == brute_largest_fitting_size(table, [gi.profile_id for gi in desired])


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_planning_a_layout_that_is_already_in_place_gives_no_steps(data: st.DataObject) -> None:
    models = data.draw(st.lists(st.sampled_from(MODELS), min_size=1, max_size=3))
    observation = empty_observation(models)
    layouts = {i: data.draw(st.sampled_from(enumerate_fitting_multisets(m.profiles))) for i, m in enumerate(models)}
    built = _built(observation, _node(layouts))
    result = plan(built, desired_of(built))
    assert result.is_empty
    assert all(g.is_unchanged for g in result.gpus)


def _ci_variants(gi: DesiredGi) -> list[DesiredGi]:
    """The GI with its default CI, and where the GI allows it, split into 1c compute instances."""
    profile = T.gi_profile(gi.profile_id)
    assert profile is not None
    one_c = profile.ci_profile(0)
    if profile.slices == 1 or one_c is None or one_c.max_instances < profile.slices:
        return [gi]
    return [gi, DesiredGi(gi.profile_id, (0,) * profile.slices)]


@st.composite
def _a100_layouts(draw: st.DrawFn) -> tuple[DesiredGi, ...]:
    base = draw(st.sampled_from(enumerate_fitting_multisets(T)))
    return tuple(sorted(draw(st.sampled_from(_ci_variants(gi))) for gi in base))


@settings(max_examples=60, deadline=None)
@given(first=_a100_layouts(), target=_a100_layouts())
def test_changing_layout_keeps_as_many_gis_as_any_legal_packing_could(
    first: tuple[DesiredGi, ...], target: tuple[DesiredGi, ...]
) -> None:
    before = _built(empty_observation([A100]), _node({0: first}))
    result = plan(before, _node({0: target}))
    after = apply_all(before, result.steps)
    assert gi_multiset(after.gpu(0)) == sorted(target)
    gpu_plan = result.gpus[0]
    assert len(gpu_plan.keep) == brute_max_kept(T, before.gpu(0).gpu_instances, target)
    assert all(after.gpu(0).gi_at(gi.placement) == gi for gi in gpu_plan.keep)


def test_two_3g_becoming_3g_2g_1g_keeps_one_3g_at_its_placement() -> None:
    before = _built(empty_observation([A100]), _node({0: _gis((9, 2))}))
    result = plan(before, _node({0: _gis((9, 1), (14, 1), (19, 1))}))
    gpu_plan = result.gpus[0]
    assert [(gi.profile_id, gi.placement) for gi in gpu_plan.keep] == [(9, Placement(0, 4))]
    assert [(gi.profile_id, gi.placement) for gi in gpu_plan.destroy] == [(9, Placement(4, 4))]
    assert [p for _, p in gpu_plan.create] == [Placement(4, 2), Placement(6, 1)]
    assert not any(s.gi_placement == Placement(0, 4) for s in result.steps)


def test_a_busy_gi_is_the_one_kept_when_either_could_stay() -> None:
    before = _built(empty_observation([A100]), _node({0: _gis((9, 2))}))
    before = with_process(before, gpu=0, placement=Placement(4, 4))
    gpu_plan = plan(before, _node({0: _gis((9, 1), (14, 1), (19, 1))})).gpus[0]
    assert [gi.placement for gi in gpu_plan.keep] == [Placement(4, 4)]


def test_changing_one_gpu_of_eight_from_all_balanced_to_all_1g_leaves_the_other_seven_untouched() -> None:
    before = _built(empty_observation([A100] * 8), _node(dict.fromkeys(range(8), ALL_BALANCED)))
    result = plan(before, _node({i: ALL_1G if i == 5 else ALL_BALANCED for i in range(8)}))
    assert {step.gpu for step in result.steps} == {5}
    assert [g.gpu for g in result.gpus if not g.is_unchanged] == [5]
    after = apply_all(before, result.steps)
    assert gi_multiset(after.gpu(5)) == sorted(ALL_1G)


def test_a_gi_with_different_compute_instances_is_destroyed_and_recreated() -> None:
    before = _built(empty_observation([A100]), _node({0: _gis((9, 1))}))
    result = plan(before, _node({0: (DesiredGi(9, (0, 0, 0)),)}))
    kinds = Counter(step.kind for step in result.steps)
    assert kinds == Counter(
        {StepKind.DESTROY_CI: 1, StepKind.DESTROY_GI: 1, StepKind.CREATE_GI: 1, StepKind.CREATE_CI: 3}
    )
    create_cis = [s.ci_placement for s in result.steps if s.kind is StepKind.CREATE_CI]
    assert create_cis == [Placement(0, 1), Placement(1, 1), Placement(2, 1)]
    apply_all(before, result.steps)


@pytest.mark.parametrize(("model", "resets"), [(A100, True), (H100, False)], ids=["ampere", "hopper"])
def test_turning_mig_off_on_two_gpus_of_eight_destroys_their_instances_first(model: GpuModel, resets: bool) -> None:
    before = _built(empty_observation([model] * 8), _node(dict.fromkeys(range(8), ALL_BALANCED)))
    result = plan(before, _node({i: None if i in (2, 6) else ALL_BALANCED for i in range(8)}))
    assert {step.gpu for step in result.steps} == {2, 6}
    kinds = [step.kind for step in result.steps if step.gpu == 2]
    expected_tail = [StepKind.SET_MODE, StepKind.RESET_GPU] if resets else [StepKind.SET_MODE]
    assert kinds[-len(expected_tail) :] == expected_tail
    assert kinds.count(StepKind.DESTROY_GI) == 4
    after = apply_all(before, result.steps)
    assert not after.gpu(2).mig_current
    assert not after.gpu(2).gpu_instances
    assert after.gpu(3) == before.gpu(3)


@pytest.mark.parametrize(("model", "resets"), [(A100, True), (H100, False)], ids=["ampere", "hopper"])
def test_turning_mig_on_resets_only_ampere_gpus_and_only_the_ones_that_change(model: GpuModel, resets: bool) -> None:
    observation = empty_observation([model] * 8, mig_enabled=False)
    result = plan(observation, _node({1: ALL_BALANCED, 4: ALL_1G, 5: None}))
    assert {s.gpu for s in result.steps if s.kind is StepKind.SET_MODE} == {1, 4}
    assert {s.gpu for s in result.steps if s.kind is StepKind.RESET_GPU} == ({1, 4} if resets else set())
    assert [g.gpu for g in result.gpus] == [1, 4, 5]
    unchanged = result.gpu(5)
    assert unchanged is not None
    assert unchanged.is_unchanged
    after = apply_all(observation, result.steps)
    assert after.gpu(1).mig_current
    assert after.gpu(4).mig_current
    assert gi_multiset(after.gpu(4)) == sorted(ALL_1G)


def test_an_ampere_gpu_whose_pending_mode_already_matches_needs_only_the_reset() -> None:
    (gpu,) = empty_observation([A100], mig_enabled=False).gpus
    pending = Observation(gpus=(dataclasses.replace(gpu, mig_pending=True),))
    result = plan(pending, _node({0: ()}))
    assert [s.kind for s in result.steps] == [StepKind.RESET_GPU]
    assert result.gpus[0].mode_change is None
    assert result.gpus[0].reset


def test_a_hopper_gpu_left_pending_gets_set_mode_again_and_never_a_reset() -> None:
    (gpu,) = empty_observation([H100], mig_enabled=False).gpus
    pending = Observation(gpus=(dataclasses.replace(gpu, mig_pending=True),))
    result = plan(pending, _node({0: _gis((0, 1))}))
    kinds = [s.kind for s in result.steps]
    assert kinds[0] is StepKind.SET_MODE
    assert StepKind.RESET_GPU not in kinds
    assert not result.steps[0].is_done(pending)


def test_an_ampere_gpu_with_a_pending_disable_that_is_wanted_on_keeps_its_instances() -> None:
    before = _built(empty_observation([A100]), _node({0: ALL_BALANCED}))
    flipped = Observation(gpus=(dataclasses.replace(before.gpu(0), mig_pending=False),))
    result = plan(flipped, _node({0: ALL_BALANCED}))
    assert [s.kind for s in result.steps] == [StepKind.SET_MODE]
    assert len(result.gpus[0].keep) == 4


def test_steps_run_by_kind_then_gpu_and_create_larger_gis_first() -> None:
    before = _built(empty_observation([A100, H100, A100]), _node({0: ALL_BALANCED, 1: ALL_1G, 2: ALL_BALANCED}))
    result = plan(before, _node({0: _gis((19, 7)), 1: None, 2: _gis((19, 1), (14, 1), (5, 1))}))
    ranks = [(STEP_ORDER.index(s.kind), s.gpu) for s in result.steps]
    assert ranks == sorted(ranks)
    assert {s.kind for s in result.steps} == set(StepKind) - {StepKind.RESET_GPU}  # GPU 1 is a Hopper
    created = [s.gi_placement for s in result.steps if s.kind is StepKind.CREATE_GI and s.gpu == 2]
    assert created == [Placement(0, 4), Placement(4, 2), Placement(6, 1)]
    apply_all(before, result.steps)


def test_gpus_absent_from_the_desired_layout_are_untouched() -> None:
    before = _built(empty_observation([A100] * 2), _node({0: ALL_BALANCED, 1: ALL_BALANCED}))
    result = plan(before, _node({1: ALL_1G}))
    assert [g.gpu for g in result.gpus] == [1]
    assert {s.gpu for s in result.steps} == {1}


def test_a_layout_that_does_not_fit_names_the_gpu_and_the_closest_layout() -> None:
    observation = empty_observation([A100] * 2)
    with pytest.raises(LayoutDoesNotFitError) as caught:
        plan(observation, _node({0: ALL_BALANCED, 1: _gis((9, 2), (14, 1))}))
    message = str(caught.value)
    assert message.startswith("GPU 1 (NVIDIA A100-SXM4-40GB): 3g.20gb x2 + 2g.10gb x1 does not fit")
    assert "needs 10 memory slices, the GPU has 8" in message
    assert message.endswith("closest layout that fits: 3g.20gb x2 (drop 2g.10gb x1)")


def test_a_fragmentation_refusal_lists_the_legal_placements() -> None:
    with pytest.raises(LayoutDoesNotFitError) as caught:
        plan(empty_observation([A100]), _node({0: _gis((14, 3), (19, 2))}))
    message = str(caught.value)
    assert "no choice of legal placements" in message
    assert "2g.10gb at 0:2 2:2 4:2" in message
    assert "closest layout that fits: 2g.10gb x3 + 1g.5gb x1 (drop 1g.5gb x1)" in message


def test_two_media_engine_gis_are_refused() -> None:
    a30 = model_by_key("A30-24GB")
    desired = (default_gi(a30.profiles, 6), default_gi(a30.profiles, 21))
    with pytest.raises(LayoutDoesNotFitError, match=r"GPU 0 \(NVIDIA A30\): .*media engines.*closest layout that fits"):
        plan(empty_observation([a30]), _node({0: desired}))


def test_unplaceable_compute_instances_are_refused() -> None:
    with pytest.raises(LayoutDoesNotFitError, match=r"compute instances of 3g.20gb\[2c.3g.20gb x2\]"):
        plan(empty_observation([A100]), _node({0: (DesiredGi(9, (1, 1)),)}))


def test_a_gpu_without_a_profile_table_cannot_take_instances() -> None:
    (gpu,) = empty_observation([A100]).gpus
    unknown = Observation(gpus=(dataclasses.replace(gpu, profiles=None),))
    with pytest.raises(
        LayoutDoesNotFitError, match=r"GPU 0 \(NVIDIA A100-SXM4-40GB\): its MIG profile table is unknown"
    ):
        plan(unknown, _node({0: ALL_1G}))
    assert plan(unknown, _node({0: ()})).is_empty


def test_a_gpu_without_mig_or_missing_from_the_node_is_refused() -> None:
    (gpu,) = empty_observation([A100], mig_enabled=False).gpus
    no_mig = Observation(gpus=(dataclasses.replace(gpu, mig_capable=False),))
    with pytest.raises(LayoutDoesNotFitError, match="does not support MIG"):
        plan(no_mig, _node({0: ALL_1G}))
    assert plan(no_mig, _node({0: None})).is_empty
    with pytest.raises(LayoutDoesNotFitError, match=r"GPU 3 .*no such GPU \(present: 0\)"):
        plan(no_mig, _node({3: None}))


def test_an_ampere_gpu_with_a_pending_disable_that_is_wanted_off_loses_its_instances_and_is_reset() -> None:
    before = _built(empty_observation([A100]), _node({0: ALL_BALANCED}))
    flipped = Observation(gpus=(dataclasses.replace(before.gpu(0), mig_pending=False),))
    result = plan(flipped, _node({0: None}))
    kinds = [s.kind for s in result.steps]
    assert StepKind.SET_MODE not in kinds
    assert kinds[-1] is StepKind.RESET_GPU
    assert kinds.count(StepKind.DESTROY_GI) == 4
    assert not apply_all(flipped, result.steps).gpu(0).mig_current
