"""A scheduler stand-in for the simulated pool: it binds pending GPU pods and the node's kubelet starts them.

It filters as kube-scheduler does for what the demand cares about (the node not cordoned; nodeSelector,
required node affinity and taints, as `DemandPod.may_run_on`; every requested GPU resource free in
the Node's allocatable less what the pods bound there request) and binds the highest-priority,
longest-waiting pod first, to the first node by name that fits. It does not score, preempt or look
at CPU and memory: the tests on the real control plane (tests/realkube) run kube-scheduler itself.
The fake API server has no binding subresource, so binding is a direct write of spec.nodeName.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from types import TracebackType

from migagent.clock import Clock, SystemClock
from migagent.demand.advise import pending_order
from migagent.kube.demand_api import DemandApi
from migagent.node.names import GPU_RESOURCE, is_gpu_resource
from migagent.node.scheduling import DemandNode, DemandPod
from migagent_sim.kubelet import FakeKubelet

_LOG = logging.getLogger(__name__)
JsonDict = dict[str, object]
Bind = Callable[[DemandPod, str], None]


def _free(node: DemandNode, pods: list[DemandPod]) -> Counter[str]:
    free: Counter[str] = Counter({n: c for n, c in node.view.allocatable.items() if is_gpu_resource(n)})
    for pod in pods:
        if pod.node_name == node.name and not pod.finished:
            free.subtract(pod.requests)
    return free


def choose(pods: list[DemandPod], nodes: list[DemandNode]) -> list[tuple[DemandPod, str]]:
    """(pod, node) for every pending pod that fits somewhere, in the order they are bound."""
    free = {node.name: _free(node, pods) for node in nodes}
    chosen: list[tuple[DemandPod, str]] = []
    for pod in pending_order(pods):
        for node in sorted(nodes, key=lambda n: n.name):
            if node.view.unschedulable or pod.may_run_on(node.name, node.view.labels, node.taints) is not None:
                continue
            if all(free[node.name][resource] >= count for resource, count in pod.requests.items()):
                free[node.name].subtract(pod.requests)
                chosen.append((pod, node.name))
                break
    return chosen


class SchedulerStandIn:
    """Runs `choose` every `poll_s` in a thread (a context manager); `bind` writes the binding."""

    def __init__(self, api: DemandApi, kubelets: Mapping[str, FakeKubelet], bind: Bind, *, poll_s: float = 0.1,
                 clock: Clock | None = None) -> None:
        self._api = api
        self._kubelets = kubelets
        self._bind = bind
        self._poll_s = poll_s
        self._clock = clock or SystemClock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sim-scheduler", daemon=True)
        self.bound: list[tuple[str, str, float]] = []
        """(pod, node, wall time) of each binding."""

    def __enter__(self) -> SchedulerStandIn:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(10.0)

    def once(self) -> int:
        pods = self._api.list_gpu_pods()
        bound = 0
        for pod, node in choose(pods, self._api.list_demand_nodes("")):
            if node not in self._kubelets:
                continue
            self._bind(pod, node)
            resource = next(iter(pod.requests))
            try:
                self._kubelets[node].run_workload(
                    pod.ref.namespace, pod.ref.name, profile=None if resource == GPU_RESOURCE else resource,
                    labels=pod.labels, owner_kind=pod.owner_kinds[0] if pod.owner_kinds else None, bound=True,
                )
            except ValueError as error:  # the Node's allocatable was ahead of its devices: try again later
                _LOG.info("scheduler stand-in: %s stays pending: %s", pod.name, error)
                self._bind(pod, "")
                continue
            self.bound.append((pod.name, node, self._clock.wall()))
            bound += 1
        return bound

    def _run(self) -> None:
        while not self._stop.wait(self._poll_s):
            try:
                self.once()
            except Exception:  # a test's API server going away; the next look tries again
                _LOG.exception("scheduler stand-in: a look failed")
