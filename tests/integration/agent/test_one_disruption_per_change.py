"""One disruption per change: a label change during an attempt is seen at the next safe point (between
NVML steps, during the drain's wait, before the success write); the attempt re-plans from what the
GPUs hold to the new layout, keeping its cordon, and `success` is written only for the label that is
on the Node, conditionally on its resourceVersion."""

from __future__ import annotations

import pytest

from migagent.attempt.phases import AgentPhase, Outcome
from migagent.node.names import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL
from migagent.node.port import NodeChangedError
from migagent.reconcile.ports import NodeDriver
from migagent.sources.node_label import NodeLabelSource
from migagent_sim.cluster import AnySimulation, SimCluster
from migagent_sim.doubles.intercept import InterceptingDriver
from tests.integration.agent.support import (
    BLOCKING_FOR_NOW,
    SMALL_ALL_1G,
    JsonDict,
    advertised,
    eventually,
    workload_names,
)

SMALL_7G = {"nvidia.com/mig-7g.80gb": 2}


def _cordon_flips(cluster: AnySimulation) -> list[bool]:
    """Every change of spec.unschedulable on the Node, in order (False -> True is a cordon)."""
    flips: list[bool] = []

    def seen(node: JsonDict) -> None:
        now = bool(node["spec"].get("unschedulable"))
        if not flips or flips[-1] != now:
            flips.append(now)

    flips.append(bool(cluster.node()["spec"].get("unschedulable")))
    cluster.api.on_node_changed(seen)
    return flips


def _states(cluster: AnySimulation) -> list[tuple[str | None, str | None]]:
    """(label, state) pairs the Node showed, in order."""
    seen: list[tuple[str | None, str | None]] = []
    cluster.api.on_node_changed(
        lambda node: seen.append(
            (node["metadata"]["labels"].get(MIG_CONFIG_LABEL), node["metadata"]["labels"].get(MIG_CONFIG_STATE_LABEL))
        )
    )
    return seen


def _watching(source: NodeLabelSource, layout: str) -> None:
    eventually(lambda: source.desired == layout, what=f"the watch to see {layout}", timeout_s=10)


def test_a_label_change_between_nvml_steps_re_plans_to_the_new_layout_with_one_cordon(cluster: AnySimulation) -> None:
    source_box: list[NodeLabelSource] = []
    changed: list[str] = []
    mutations: list[str] = []

    def after(name: str) -> None:
        mutations.append(name)
        if not changed:  # the first NVML mutation has completed: the admin changes their mind
            changed.append(name)
            cluster.label("all-7g")
            _watching(source_box[0], "all-7g")

    def wrap(driver: NodeDriver) -> NodeDriver:
        return InterceptingDriver(driver, before=lambda _: None, after=after)

    agent, source = cluster.build_agent(wrap_driver=wrap)
    source_box.append(source)
    flips = _cordon_flips(cluster)
    states = _states(cluster)
    source.start()
    try:
        _watching(source, "all-1g.10gb")
        cluster.label("all-balanced")
        _watching(source, "all-balanced")
        assert agent.reconcile_once() is Outcome.APPLIED
    finally:
        source.stop()

    assert changed, "the first NVML step ran"
    # Seen before the second step: no GI of all-balanced was ever created, only the two 7g ones.
    assert mutations.count("create_gpu_instance") == 2
    assert advertised(cluster) == SMALL_7G
    labels = cluster.node()["metadata"]["labels"]
    assert (labels[MIG_CONFIG_LABEL], labels[MIG_CONFIG_STATE_LABEL]) == ("all-7g", "success")
    assert flips == [False, True, False], "exactly one cordon, lifted once at the end"
    assert ("all-balanced", "success") not in states


def test_a_label_change_during_the_drain_wait_re_plans_without_uncordoning(cluster: SimCluster) -> None:
    # A pod on GPU 0 slot 6 (all-balanced destroys it) whose PDB blocks for now: the drain waits.
    cluster.kubelet.run_workload("ml", "inference-0", mig_uuid=cluster.mig_uuid(0, 6), labels={"app": "inference"})
    cluster.api.add_pdb("ml", "inference-pdb", match_labels={"app": "inference"}, disruptions_allowed=0)
    cluster.api.set_pdb_status("ml", "inference-pdb", BLOCKING_FOR_NOW)
    flips = _cordon_flips(cluster)
    states = _states(cluster)
    running = cluster.start_agent()
    try:
        eventually(lambda: cluster.node()["metadata"]["labels"].get(MIG_CONFIG_STATE_LABEL) == "success", what="start")
        cluster.label("all-balanced")
        eventually(
            lambda: any(r.subresource == "eviction" and r.status == 429 for r in cluster.api.requests),
            what="the drain waiting on the PDB",
        )
        cluster.label("all-1g.10gb")  # back to what the GPUs hold: nothing needs to move after all
        eventually(
            lambda: (
                cluster.node()["metadata"]["labels"].get(MIG_CONFIG_STATE_LABEL) == "success" and flips[-1] is False
            ),
            what="success for all-1g.10gb",
        )
    finally:
        running.stop()
    assert flips == [False, True, False], "one cordon, kept across the label change"
    assert not [s for s in states if s[1] == "failed"], "the drain was left at the label change, not timed out"
    assert cluster.node()["metadata"]["labels"][MIG_CONFIG_LABEL] == "all-1g.10gb"
    assert advertised(cluster) == SMALL_ALL_1G
    assert "inference-0" in workload_names(cluster), "the pod was never evicted"


def test_success_is_not_written_for_a_label_changed_just_before_the_success_write(cluster: SimCluster) -> None:
    changed: list[AgentPhase] = []

    def change_label_once(phase: AgentPhase) -> None:
        # The watch is not running here, so only the success write's re-read of the Node can see it.
        if phase is AgentPhase.READVERTISE and not changed:
            changed.append(phase)
            cluster.label("all-7g")

    agent, _ = cluster.build_agent(phase_hook=change_label_once)
    states = _states(cluster)
    cluster.label("all-balanced")

    assert agent.reconcile_once() is Outcome.APPLIED

    assert ("all-7g", "success") in states
    assert ("all-balanced", "success") not in states
    assert advertised(cluster) == SMALL_7G


def test_a_conditional_write_at_a_stale_resource_version_is_refused_with_409(cluster: SimCluster) -> None:
    api = cluster.agent_api()  # as the agent's service account: RBAC and admission apply
    stale = api.get_node().resource_version
    cluster.label("all-7g")
    with pytest.raises(NodeChangedError):
        api.patch_metadata(labels={MIG_CONFIG_STATE_LABEL: "success"}, resource_version=stale)
    fresh = api.get_node()
    assert fresh.labels.get(MIG_CONFIG_STATE_LABEL) != "success", "the refused write changed nothing"
    written = api.patch_metadata(labels={MIG_CONFIG_STATE_LABEL: "pending"}, resource_version=fresh.resource_version)
    assert written.labels[MIG_CONFIG_STATE_LABEL] == "pending"


def test_a_typo_label_mid_apply_leaves_every_gpu_consistent_and_the_node_released(cluster: SimCluster) -> None:
    source_box: list[NodeLabelSource] = []
    typed: list[str] = []

    def after(name: str) -> None:
        if name == "create_gpu_instance" and not typed:  # a new GI exists, its compute instances not yet
            typed.append(name)
            cluster.label("all-balancd")
            _watching(source_box[0], "all-balancd")

    def wrap(driver: NodeDriver) -> NodeDriver:
        return InterceptingDriver(driver, before=lambda _: None, after=after)

    agent, source = cluster.build_agent(wrap_driver=wrap)
    source_box.append(source)
    source.start()
    try:
        _watching(source, "all-1g.10gb")
        cluster.label("all-balanced")
        _watching(source, "all-balanced")
        assert agent.reconcile_once() is Outcome.FAILED
    finally:
        source.stop()

    assert typed, "the typo came between a create-GI step and its create-CI step"
    bare = [
        (index, gi.placement.start)
        for index, gpu in enumerate(cluster.fake.state.gpus)
        for gi in gpu.gpu_instances
        if not gi.compute_instances
    ]
    assert bare == [], "a GPU instance was left without compute instances"
    devices = sum(len(gi.compute_instances) for gpu in cluster.fake.state.gpus for gi in gpu.gpu_instances)
    eventually(lambda: sum(advertised(cluster).values()) == devices, what="every MIG device advertised")
    labels = cluster.node()["metadata"]["labels"]
    assert labels[MIG_CONFIG_STATE_LABEL] == "failed"
    assert not cluster.node()["spec"].get("unschedulable")
