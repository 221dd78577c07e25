"""Demand on the simulated pool: pending GPU pods, the scheduler stand-in that binds them, and the
clients `migagent advise` and the autopilot use, for `migagent demo autopilot` and the tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from migagent.clock import SystemClock
from migagent.kube.demand_api import DemandApi
from migagent.node.scheduling import DemandPod
from migagent_sim.apiserver.rbac import UserInfo
from migagent_sim.pool import SimPool
from migagent_sim.scheduler import SchedulerStandIn

AUTOPILOT = UserInfo.service_account("migagent", "migagent-autopilot")


def demand_api(pool: SimPool, user: UserInfo | None = None) -> DemandApi:
    return DemandApi(pool.client(user), clock=SystemClock())


def submit(
    pool: SimPool, name: str, resource: str, *, namespace: str = "ml", priority: int = 0,
    labels: Mapping[str, str] | None = None, node_selector: Mapping[str, str] | None = None,
) -> str:
    """A pending pod of a ReplicaSet asking one `resource` (what a Deployment's new replica is)."""
    pool.api.create_pod(node_name=None, namespace=namespace, name=name, labels=dict(labels or {}),
                        owner_kind="ReplicaSet", resources={resource: 1})

    def schedule_fields(pod: dict[str, object]) -> None:
        spec = pod["spec"]
        assert isinstance(spec, dict)
        spec["priority"] = priority
        if node_selector:
            spec["nodeSelector"] = dict(node_selector)

    pool.api.update_pod(namespace, name, schedule_fields)
    return f"{namespace}/{name}"


def running_on(pool: SimPool, pods: Iterable[str]) -> dict[str, str]:
    """`namespace/name` -> the node it runs on, for those of `pods` that are Running."""
    found: dict[str, str] = {}
    for pod in pods:
        namespace, name = pod.split("/")
        stored = pool.api.pod(namespace, name)
        if stored is not None and stored.get("status", {}).get("phase") == "Running":
            found[pod] = stored["spec"].get("nodeName", "")
    return found


def scheduler(pool: SimPool, *, poll_s: float = 0.1) -> SchedulerStandIn:
    """Binds pending pods on `pool` (a context manager); binding writes spec.nodeName directly."""

    def bind(pod: DemandPod, node: str) -> None:
        def set_node(stored: dict[str, object]) -> None:
            spec = stored["spec"]
            assert isinstance(spec, dict)
            if node:
                spec["nodeName"] = node
            else:
                spec.pop("nodeName", None)

        pool.api.update_pod(pod.ref.namespace, pod.ref.name, set_node)

    kubelets = {name: node.kubelet for name, node in pool.nodes.items()}
    return SchedulerStandIn(demand_api(pool), kubelets, bind, poll_s=poll_s)
