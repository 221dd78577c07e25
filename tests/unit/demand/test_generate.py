"""`advise --generate`: on any GPU model and any pods, a generated layout is valid, evicts nothing, leaves
the GPUs it does not list untouched, and serves what it can of the demand."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from migagent.catalog import model_by_key
from migagent.clock import FakeClock
from migagent.demand.generate import config_name, generate_node, generated_layout
from migagent.layout.profile import gi_profile_name
from migagent.layout.strategy import mig_resource_name
from migagent.rollout.impact import predict
from migagent.rollout.reported import ReportedNode
from migagent_sim.model_node import ModelNode
from migagent_sim.model_pool import ModelPool

MODELS = ("H100-80GB-SXM", "A100-40GB", "A30-24GB", "B200-180GB")
LAYOUTS = """\
version: v1
mig-configs:
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
"""


def _node(model_key: str, layout_doc: Mapping[str, Any], busy: list[bool]) -> ModelNode:
    node = ModelNode.empty("n", model_key, 2)
    pool = ModelPool([node], yaml.safe_dump(layout_doc), clock=FakeClock())
    node.start_change(pool.layout, "start", done_at=0.0)
    node.finish_change(0.0)
    gis = [gi for gpu in node.gpus for gi in sorted(gpu.gis, key=lambda g: g.placement)]
    for index, gi in enumerate(gis):
        if busy[index % len(busy)]:
            gi.pod = f"ml/p{index}"
    return node


@settings(max_examples=40, deadline=None)
@given(
    model_key=st.sampled_from(MODELS),
    busy=st.lists(st.booleans(), min_size=1, max_size=7),
    wanted=st.lists(st.integers(min_value=0, max_value=20), min_size=1, max_size=6),
)
def test_a_generated_layout_is_valid_evicts_nothing_and_touches_only_the_gpus_it_lists(
    model_key: str, busy: list[bool], wanted: list[int]
) -> None:
    model = model_by_key(model_key)
    table = model.profiles
    start = {"version": "v1", "mig-configs": {"start": [{"devices": "all", "mig-enabled": True,
             "mig-devices": {str(gi_profile_name(table.gi_profiles[0], table)): 1}}]}}
    node = _node(model_key, start, busy)
    resources = [mig_resource_name(gi_profile_name(gi, table)) for gi in table.gi_profiles]
    demand = [(resources[i % len(resources)], 0) for i in wanted]
    reported = ReportedNode(node.observation(), {gi: tuple(p) for gi, p in node.pods_by_gi().items()})
    changes = generate_node(reported, demand)
    if not changes:
        return
    name = config_name(changes)
    impact = predict("n", reported, generated_layout(name, changes), name)
    assert impact.plannable, impact.problem
    assert impact.evicts == ()
    assert set(impact.gpus_changed) <= set(changes)
    offered = sum(impact.capacity_after.get(r, 0) - impact.capacity_before.get(r, 0) for r, _ in set(demand))
    assert offered > 0  # a change that serves nothing is never generated
    assert name == config_name(changes)  # named by content


def test_a_generated_layout_serves_the_demand_on_idle_gpus_and_keeps_the_busy_instances() -> None:
    node = _node("H100-80GB-SXM", yaml.safe_load(LAYOUTS.replace("all-balanced", "start")), [True, False])
    reported = ReportedNode(node.observation(), {gi: tuple(p) for gi, p in node.pods_by_gi().items()})
    changes = generate_node(reported, [("nvidia.com/mig-7g.80gb", 0)])
    assert changes == {}  # each GPU holds pods: no whole GPU is free
    empty = _node("H100-80GB-SXM", yaml.safe_load(LAYOUTS.replace("all-balanced", "start")), [False])
    reported = ReportedNode(empty.observation(), {})
    changes = generate_node(reported, [("nvidia.com/mig-7g.80gb", 0), ("nvidia.com/mig-3g.40gb", 0)])
    assert changes == {1: {"7g.80gb": 1}}  # GPU 0's idle 3g.40gb serves one as it is; GPU 1 becomes the 7g
