"""Issue 14, item 2: one MIG manager per node. Two agents started together on one node: exactly one
changes the GPUs (state lock and Lease); another MIG owner on the node (NVIDIA's mig-manager, a DRA
driver with DynamicMIG) is refused by name with nothing touched."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from migagent.attempt.listener import Outcome
from migagent.attempt.phases import AgentPhase
from migagent.loops.ownership import OwnedAgent
from migagent.nvml.driver import GpuDriver
from migagent.reconcile.ports import NodeDriver
from migagent_sim.cluster import SimCluster, SimClusterConfig
from migagent_sim.doubles.intercept import InterceptingDriver
from tests.integration.agent.support import (
    SMALL,
    SMALL_BALANCED,
    advertised_of,
    assert_released,
    condition,
    eventually,
    node_when,
    state_of,
)

LEASE = ("migagent", "migagent-node-gpu-node-1")


def _counting(counts: Counter[str], who: str) -> Callable[[GpuDriver], NodeDriver]:
    def wrap(driver: GpuDriver) -> NodeDriver:
        return InterceptingDriver(driver, after=lambda name: counts.update([who]))

    return wrap


def test_two_agents_started_together_on_one_node_exactly_one_changes_the_gpus(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    cluster = make_cluster(SMALL)
    mutations: Counter[str] = Counter()
    options = cluster.options()
    first = cluster.start_agent(replace(options, holder_identity="agent-a"), wrap_driver=_counting(mutations, "a"))
    second = cluster.start_agent(replace(options, holder_identity="agent-b"), wrap_driver=_counting(mutations, "b"))
    cluster.label("all-balanced")

    node_when(cluster, lambda n: state_of(n) == "success" and advertised_of(n) == SMALL_BALANCED, what="the change")
    assert len(mutations) == 1, f"both agents changed GPUs: {mutations}"
    changer = f"agent-{next(iter(mutations))}"
    running = {"agent-a": first, "agent-b": second}
    waiting = second if changer == "agent-a" else first
    assert waiting.agent.reconciles == 0, "the agent without the state lock reconciled"
    # The Lease is held only while an attempt writes: released once the change is reported.
    eventually(lambda: not _holder(cluster), what="the Lease released after the change")

    # The owner leaves (a rollout): the other takes over without waiting for any expiry.
    running[changer].stop()
    eventually(lambda: waiting.agent.reconciles > 0, what="the second agent to take over", timeout_s=10.0)
    assert _holder(cluster) is None, "an idle agent holds the Lease"
    assert_released(cluster)


def _holder(cluster: SimCluster) -> str | None:
    spec: dict[str, str] = (cluster.api.lease(*LEASE) or {}).get("spec", {})
    return spec.get("holderIdentity")


def test_a_lease_left_by_a_killed_agent_is_taken_only_after_it_expires(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    cluster = make_cluster(SMALL)
    options = replace(cluster.options(), lease_duration_s=1)
    dead, _ = cluster.build_agent(replace(options, holder_identity="dead"))
    assert dead.ownership.acquire(threading.Event())
    assert dead.ownership.claim(threading.Event())  # mid-change: it holds the Lease
    dead.ownership.abandon()  # killed: its state lock goes with the process, its Lease stays

    successor = cluster.start_agent(replace(options, holder_identity="successor"))
    eventually(lambda: successor.agent.reconciles > 0, what="the successor to take over", timeout_s=10.0)

    node_when(cluster, lambda n: state_of(n) == "success", what="the successor's report")
    eventually(lambda: not _holder(cluster), what="the successor to release the Lease after writing")
    lease = cluster.api.lease(*LEASE) or {}
    assert lease["spec"]["leaseTransitions"] == 1, "taken over once: from the dead agent, after it expired"


def test_an_agent_that_cannot_renew_its_lease_mid_change_stops_before_touching_the_gpus(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    """Called without a stop event (as `apply` and tests do): the renewer's "someone else may own the
    node now" must still reach the attempt in flight, not an event nobody reads."""
    cluster = make_cluster(SMALL)
    mutations: Counter[str] = Counter()
    agents: list[OwnedAgent] = []

    def renewals_refused_as_the_drain_starts(phase: AgentPhase) -> None:
        if phase is AgentPhase.DRAIN:
            cluster.api.inject_fault("PUT", r"/leases/", 503, times=10_000)
            eventually(agents[0].ownership.lost.is_set, what="the renewer to give the Lease up", timeout_s=10.0)

    options = replace(cluster.options(), lease_duration_s=1)
    agent, _ = cluster.build_agent(
        options, phase_hook=renewals_refused_as_the_drain_starts, wrap_driver=_counting(mutations, "a")
    )
    agents.append(agent)
    cluster.label("all-balanced")

    assert agent.reconcile_once() is Outcome.STOPPED
    assert not mutations, "the GPUs were changed after the Lease was lost"


def test_nvidia_mig_manager_on_the_node_is_refused_by_name_and_nothing_is_touched(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    cluster = make_cluster(SMALL)
    cluster.api.create_pod(
        node_name=cluster.config.node_name, namespace="gpu-operator", name="nvidia-mig-manager-x7",
        labels={"app": "nvidia-mig-manager"}, owner_kind="DaemonSet", owner_name="nvidia-mig-manager",
    )
    agent, _ = cluster.build_agent()
    before = cluster.driver().observe()
    cluster.label("all-balanced")

    assert agent.reconcile_once() is Outcome.FAILED

    found = condition(cluster)
    assert found["reason"] == "OtherMigOwner"
    assert "gpu-operator/nvidia-mig-manager-x7" in found["message"]
    assert cluster.driver().observe() == before
    assert_released(cluster)
    assert not any(r.subresource == "eviction" for r in cluster.api.requests)


def test_the_operators_mig_manager_label_counts_only_when_the_cluster_policy_enables_mig_manager(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    labels = {**SMALL.labels, "nvidia.com/gpu.deploy.mig-manager": "true"}
    cluster = make_cluster(replace(SMALL, labels=labels))
    cluster.api.add_cluster_policy("cluster-policy", {"migManager": {"enabled": False}})
    options = replace(cluster.options(), cluster_policy="cluster-policy")
    agent, _ = cluster.build_agent(options)
    cluster.label("all-balanced")
    assert agent.reconcile_once() is Outcome.APPLIED

    cluster.api.add_cluster_policy("cluster-policy", {"migManager": {"enabled": True}})  # the operator turns it on
    cluster.label("all-1g.10gb")
    agent, _ = cluster.build_agent(options)
    assert agent.reconcile_once() is Outcome.FAILED
    assert condition(cluster)["reason"] == "OtherMigOwner"
    assert "nvidia.com/gpu.deploy.mig-manager=true" in condition(cluster)["message"]


def test_a_dra_driver_advertising_mig_devices_dynamically_is_refused_and_static_mig_is_not(
    make_cluster: Callable[[SimClusterConfig], SimCluster],
) -> None:
    cluster = make_cluster(SMALL)
    node = cluster.config.node_name
    static = {"name": "gpu-0-mig-1g-0", "attributes": {"type": {"string": "mig"}, "uuid": {"string": "MIG-1"}}}
    cluster.api.add_resource_slice(
        "static", {"nodeName": node, "driver": "gpu.nvidia.com", "pool": {"name": node}, "devices": [static]}
    )
    agent, _ = cluster.build_agent()
    assert agent.reconcile_once() is Outcome.UNCHANGED

    dynamic = {
        "name": "gpu-0-mig-1g.10gb-3",
        "attributes": {"type": {"string": "mig"}, "profile": {"string": "1g.10gb"}},
        "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "10Gi"}}}],
    }
    cluster.api.add_resource_slice(
        "dynamic", {"nodeName": node, "driver": "gpu.nvidia.com", "pool": {"name": node}, "devices": [dynamic]}
    )
    cluster.label("all-balanced")
    assert agent.reconcile_once() is Outcome.FAILED
    assert condition(cluster)["reason"] == "OtherMigOwner"
    assert "DynamicMIG: gpu-0-mig-1g.10gb-3" in condition(cluster)["message"]
    assert_released(cluster)


def test_the_fake_api_server_answers_lease_races_with_conflicts_like_the_real_one(tmp_path: Path) -> None:
    from kubernetes.client import CoordinationV1Api

    from migagent.clock import FakeClock
    from migagent.kube.client import make_api_client
    from migagent.kube.lease import LeaseOps, LeaseRecord, NodeLease
    from migagent.kube.timeouts import RequestTimeout
    from migagent_sim.apiserver import FakeApiServer

    with FakeApiServer() as server:
        api = CoordinationV1Api(make_api_client(kubeconfig=None, api_server=server.url))
        ops = LeaseOps(api, namespace="migagent", name="migagent-node-n1", timeout=RequestTimeout(5))
        assert ops.create(LeaseRecord("a", 10))
        assert not ops.create(LeaseRecord("b", 10)), "a second create must be 409 AlreadyExists"
        read = ops.read()
        assert read is not None
        assert read.holder == "a"
        assert ops.update(LeaseRecord("a", 10, transitions=1), resource_version=read.resource_version)
        assert not ops.update(LeaseRecord("b", 10), resource_version=read.resource_version), "stale rv: 409"

        clock = FakeClock()
        b = NodeLease(ops, identity="b", duration_s=10, clock=clock)
        assert not b.try_acquire_or_renew()
        clock.advance(9.0)
        assert not b.try_acquire_or_renew(), "taken before a whole duration was observed"
        clock.advance(1.5)
        assert b.try_acquire_or_renew()
        b.release()
        released = ops.read()
        assert released is not None
        assert released.holder is None
