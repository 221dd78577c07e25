"""Model pools for the advice and autopilot tests: H100 nodes whose agents report as the agent does
(migagent_sim.model_node), pods bound by the model's scheduler, and pods left pending."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from migagent.clock import FakeClock
from migagent.demand.advise import DemandView
from migagent.node.budgets import PdbView
from migagent.node.scheduling import DemandNode, Taint
from migagent_sim.model_node import ModelNode
from migagent_sim.model_pool import Job, ModelPool

H100 = "H100-80GB-SXM"
HOSTNAME = "kubernetes.io/hostname"
LAYOUTS = """\
version: v1
mig-configs:
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  all-3g.40gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
  all-7g.80gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
"""
ONE_G = "nvidia.com/mig-1g.10gb"
THREE_G = "nvidia.com/mig-3g.40gb"
SEVEN_G = "nvidia.com/mig-7g.80gb"


def model_node(name: str, layout: str = "all-1g.10gb", *, gpus: int = 2, labels: Mapping[str, str] | None = None,
               layouts: str = LAYOUTS) -> ModelNode:
    node = ModelNode.empty(name, H100, gpus, {HOSTNAME: name, "pool": "h100", **dict(labels or {})})
    pool = ModelPool([node], layouts, clock=FakeClock())
    node.start_change(pool.layout, layout, done_at=0.0)
    node.finish_change(0.0)
    return node


def make_pool(*nodes: ModelNode, layouts: str = LAYOUTS, reconfigure_s: float = 60.0) -> ModelPool:
    return ModelPool(list(nodes), layouts, clock=FakeClock(), reconfigure_s=reconfigure_s)


def run(pool: ModelPool, node: str, count: int, resource: str = ONE_G, *, priority: int = 0,
        prefix: str = "run", duration_s: float = 10_000.0) -> list[str]:
    """`count` pods bound to `node` by the model's scheduler, running for `duration_s`."""
    for index in range(count):
        pool.submit(Job(f"{prefix}-{node}-{index}", {resource: 1}, duration_s, priority=priority,
                        node_selector={HOSTNAME: node}))
    bound = pool.schedule()
    assert len(bound) == count, f"only {len(bound)} of {count} pods fit on {node}"
    return bound


def wait(pool: ModelPool, count: int, resource: str = THREE_G, *, priority: int = 0, prefix: str = "wait",
         selector: Mapping[str, str] | None = None, duration_s: float = 10_000.0) -> list[str]:
    """`count` pods left pending (the model's scheduler is not run for them), each to run `duration_s`."""
    return [
        pool.submit(Job(f"{prefix}-{index}", {resource: 1}, duration_s, priority=priority,
                        node_selector=dict(selector or {}))).name
        for index in range(count)
    ]


def view(pool: ModelPool, *, budgets: Sequence[PdbView] = (), taints: Mapping[str, tuple[Taint, ...]] | None = None,
         nodes: Sequence[DemandNode] | None = None) -> DemandView:
    listed = nodes if nodes is not None else [
        DemandNode(n.view, (taints or {}).get(n.name, ())) for n in pool.list_demand_nodes("")
    ]
    return DemandView(nodes=listed, pods=pool.list_gpu_pods(), layout=pool.layout, budgets=budgets,
                      now=pool.clock.wall())
