"""A simulated pool with GPU demand: full and idle nodes, pending pods, and waits on what follows."""

from __future__ import annotations

from migagent.clock import SystemClock
from migagent.node.names import MIG_CONFIG_LABEL
from migagent_sim.pool import SimPool
from tests.integration.rollout.support import wait_reported

CLOCK = SystemClock()
THREE_G = "nvidia.com/mig-3g.40gb"
FULL_NODE = "gpu-h100-1"


def fill(pool: SimPool, node: str, *, prefix: str = "small", labels: dict[str, str] | None = None) -> list[str]:
    """Every 1g.10gb device of `node` (all-1g.10gb) held by a Running pod; returns `ml/<name>`s."""
    devices = len(pool.nodes[node].fake.state.gpus) * 7
    names = [f"{prefix}-{index}" for index in range(devices)]
    for name in names:
        pool.nodes[node].kubelet.run_workload("ml", name, profile="1g.10gb", labels=labels or {"app": prefix})
    wait_reported(pool, [(node, f"ml/{name}") for name in names])
    return [f"ml/{name}" for name in names]


def layouts(pool: SimPool) -> dict[str, str | None]:
    return {name: pool.labels(name).get(MIG_CONFIG_LABEL) for name in pool.nodes}
