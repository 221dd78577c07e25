from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from migagent.catalog import all_models, model_by_key
from migagent.catalog.model import Placement
from migagent.layout.desired import DesiredGi, DesiredGpu, DesiredNode
from migagent.layout.observed import Observation
from migagent.planning import Plan, empty_observation, plan, plan_to_json, render_plan
from migagent.planning.solver import default_gi
from migagent.planning.steps import StepKind
from tests.unit.planning.simulate import apply_all, with_process
from tests.unit.planning.simulate import fitting_multisets as enumerate_fitting_multisets

A100 = model_by_key("A100-40GB")
H100 = model_by_key("H100-80GB-SXM")
T = A100.profiles


def _node(layouts: Mapping[int, tuple[DesiredGi, ...] | None]) -> DesiredNode:
    return DesiredNode(
        gpus=tuple(
            DesiredGpu(index=i, mig_enabled=gis is not None, gpu_instances=gis or ()) for i, gis in layouts.items()
        )
    )


def _balanced() -> tuple[DesiredGi, ...]:
    return (default_gi(T, 9), default_gi(T, 14), default_gi(T, 19), default_gi(T, 19))


def _busy_node() -> Observation:
    empty = empty_observation([A100, A100])
    built = apply_all(empty, plan(empty, _node({0: _balanced(), 1: _balanced()})).steps, ampere_activates=True)
    return with_process(built, gpu=0, placement=Placement(4, 4))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_plan_survives_a_json_round_trip_exactly(data: st.DataObject) -> None:
    models = data.draw(st.lists(st.sampled_from(all_models()), min_size=1, max_size=3))
    empty = empty_observation(models)
    first = {i: data.draw(st.sampled_from(enumerate_fitting_multisets(m.profiles))) for i, m in enumerate(models)}
    built = apply_all(empty, plan(empty, _node(dict(first))).steps, ampere_activates=True)
    second: dict[int, tuple[DesiredGi, ...] | None] = {
        i: data.draw(st.sampled_from([None, *enumerate_fitting_multisets(m.profiles)[:20]]))
        for i, m in enumerate(models)
    }
    original = plan(built, _node(second))
    text = json.dumps(original.to_json())
    assert Plan.from_json(json.loads(text)) == original


def test_a_plan_with_processes_and_every_step_kind_round_trips_through_json() -> None:
    node = _busy_node()
    original = plan(node, _node({0: (default_gi(T, 19),) * 7, 1: None}))
    assert {s.kind for s in original.steps} == set(StepKind)
    assert any(gi.processes for g in original.gpus for gi in g.destroy)
    assert Plan.from_json(json.loads(json.dumps(original.to_json()))) == original


def test_the_decorated_json_output_is_serialisable_and_still_loads_as_the_plan() -> None:
    node = _busy_node()
    original = plan(node, _node({0: (default_gi(T, 19),) * 7}))
    data = json.loads(json.dumps(plan_to_json(original, node)))
    assert Plan.from_json(data) == original
    assert data["is_empty"] is False
    assert data["gpus"][0]["name"] == "NVIDIA A100-SXM4-40GB"
    assert [gi["profile"] for gi in data["gpus"][0]["destroy"]] == ["2g.10gb", "3g.20gb"]
    assert [gi["profile"] for gi in data["gpus"][0]["keep"]] == ["1g.5gb", "1g.5gb"]
    assert data["steps"][0]["description"] == "GPU 0: destroy compute instance 2g.10gb at slot 0 in 2g.10gb at slot 0"


def test_the_rendered_plan_shows_keep_destroy_create_with_placements_and_names() -> None:
    empty = empty_observation([A100])
    built = apply_all(empty, plan(empty, _node({0: (default_gi(T, 9),) * 2})).steps, ampere_activates=True)
    text = render_plan(plan(built, _node({0: (default_gi(T, 9), DesiredGi(14, (0, 0)), default_gi(T, 19))})), built)
    lines = text.splitlines()
    assert lines[0] == "GPU 0 (NVIDIA A100-SXM4-40GB): keep 1, destroy 1, create 2 GI(s)"
    assert lines[1].split() == ["action", "profile", "placement", "id", "compute", "instances"]
    assert lines[2].split()[:4] == ["keep", "3g.20gb", "0:4", "GI"]
    assert lines[3].split()[:4] == ["destroy", "3g.20gb", "4:4", "GI"]
    assert lines[4].split() == ["create", "2g.10gb[1c.2g.10gb", "x2]", "4:2", "1c.2g.10gb@0:1,", "1c.2g.10gb@1:1"]
    assert lines[5].split() == ["create", "1g.5gb", "6:1", "1g.5gb@0:1"]
    assert "  steps:" in lines
    assert any(line.endswith(". destroy 3g.20gb at slot 4") for line in lines)
    assert lines[-1] == "7 step(s) in all"
    assert text == render_plan(
        plan(built, _node({0: (default_gi(T, 9), DesiredGi(14, (0, 0)), default_gi(T, 19))})), built
    )


def test_the_rendered_plan_shows_mode_changes_resets_and_untouched_gpus() -> None:
    empty = empty_observation([A100, H100], mig_enabled=False)
    text = render_plan(plan(empty, _node({0: (default_gi(T, 0),), 1: None})), empty)
    assert "GPU 0 (NVIDIA A100-SXM4-40GB): keep 0, destroy 0, create 1 GI(s)\n  mode    set MIG on\n  reset" in text
    assert "GPU 1 (NVIDIA H100 80GB HBM3): no change (0 GI(s) kept)" in text
    assert "  steps:\n    1. set MIG on\n    2. reset the GPU to activate MIG on\n" in text


def test_an_empty_plan_renders_as_no_steps() -> None:
    empty = empty_observation([H100])
    assert render_plan(plan(empty, _node({0: ()})), empty).endswith("no change (0 GI(s) kept)\n0 step(s) in all\n")


def test_identical_gpus_are_rendered_once_and_different_ones_apart() -> None:
    empty = empty_observation([A100, A100, H100, A100], mig_enabled=False)
    desired = _node({0: (default_gi(T, 0),), 1: (default_gi(T, 0),), 2: None, 3: (default_gi(T, 0),)})
    text = render_plan(plan(empty, desired), empty)
    assert text.startswith("GPUs 0-1, 3 (NVIDIA A100-SXM4-40GB), each: keep 0, destroy 0, create 1 GI(s)\n")
    assert "  steps on each:\n    1. set MIG on\n" in text
    assert "\nGPU 2 (NVIDIA H100 80GB HBM3): no change (0 GI(s) kept)\n" in text
    assert text.count("set MIG on\n") == 2  # the mode line and the step, once for the three GPUs


def test_an_offline_observation_has_catalog_tables_and_no_instances() -> None:
    observation = empty_observation([A100, H100], mig_enabled=False)
    a100, h100 = observation.gpus
    assert (a100.index, h100.index) == (0, 1)
    assert a100.profiles == A100.profiles
    assert h100.profiles == H100.profiles
    assert a100.mode_change_needs_reset
    assert not h100.mode_change_needs_reset
    assert not a100.mig_current
    assert not a100.mig_pending
    assert a100.gpu_instances == ()
    assert a100.pci_device_id == A100.primary_pci_device_id
    assert a100.uuid != h100.uuid
    assert a100.pci_bus_id != h100.pci_bus_id


def test_set_mode_on_hopper_is_done_only_once_the_mode_is_active() -> None:
    (gpu,) = empty_observation([H100], mig_enabled=False).gpus
    assert plan(Observation(gpus=(gpu,)), _node({0: None})).is_empty
    step = plan(Observation(gpus=(gpu,)), _node({0: ()})).steps[0]
    assert step.kind is StepKind.SET_MODE
    pending = Observation(gpus=(dataclasses.replace(gpu, mig_pending=True),))
    active = Observation(gpus=(dataclasses.replace(gpu, mig_pending=True, mig_current=True),))
    assert not step.is_done(pending)
    assert step.is_done(active)
