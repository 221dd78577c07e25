"""Issue 14, item 3: every blocker is found before the cordon. A process the drain would not remove
(a host process, a pod holding a GI without requesting it), several PodDisruptionBudgets on one pod,
a percentage minAvailable no eviction can satisfy, a pod with emptyDir data: each is refused by name
with 0 cordons and 0 evictions. A pod Terminating past its grace period is waited for, never re-evicted."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from migagent.attempt.drain.gate import GateSettings
from migagent.attempt.listener import Outcome
from migagent.node.names import NEXT_RETRY_ANNOTATION
from migagent_sim.cluster import SimCluster
from tests.integration.agent.support import SMALL_ALL_1G, advertised, assert_released, condition, state

JsonDict = dict[str, Any]


class NodeWatch:
    """Counts cordon episodes (unschedulable false -> true) as the API server commits them."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cordons = 0
        self._was = False
        cluster.api.on_node_changed(self._changed)

    def _changed(self, node: JsonDict) -> None:
        now = bool(node["spec"].get("unschedulable"))
        self.cordons += now and not self._was
        self._was = now


def _evictions(cluster: SimCluster) -> int:
    return sum(1 for r in cluster.api.requests if r.subresource == "eviction")


def _refused_untouched(cluster: SimCluster, watch: NodeWatch, *, options: Any = None) -> str:
    agent, _ = cluster.build_agent(options)
    cluster.label("all-balanced")  # destroys the 1g.10gb instances at slots 4, 5 and 6 of each GPU
    assert agent.reconcile_once() is Outcome.FAILED
    assert watch.cordons == 0
    assert _evictions(cluster) == 0
    assert advertised(cluster) == SMALL_ALL_1G, "the GPUs were not touched"
    assert_released(cluster)
    found = condition(cluster)
    assert found["reason"] == "DrainBlocked"
    return str(found["message"])


def _fake_proc(root: Path, pid: int, *, cgroup: str, command: str) -> None:
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "cgroup").write_text(cgroup + "\n")
    (root / str(pid) / "cmdline").write_bytes(command.replace(" ", "\0").encode() + b"\0")


def test_a_process_no_pod_holds_on_a_gi_to_destroy_is_refused_before_the_cordon(cluster: SimCluster) -> None:
    watch = NodeWatch(cluster)
    cluster.fake.sim_attach_process(cluster.mig_uuid(0, 6), pid=4242, used_memory_bytes=1 << 20)

    message = _refused_untouched(cluster, watch)

    assert "process 4242 runs on GPU 0 GPU instance at 6:1" in message


def test_a_host_process_is_named_by_pid_and_command_with_the_hosts_proc_visible(
    cluster: SimCluster, tmp_path: Path
) -> None:
    watch = NodeWatch(cluster)
    proc = tmp_path / "proc"
    _fake_proc(proc, 4242, cgroup="0::/system.slice/nvidia-dcgm.service", command="nv-hostengine -n")
    cluster.fake.sim_attach_process(cluster.mig_uuid(1, 5), pid=4242, used_memory_bytes=1 << 20)
    options = cluster.options(gate=GateSettings(proc_root=proc))

    message = _refused_untouched(cluster, watch, options=options)

    assert "host process 4242 (nv-hostengine -n) runs on GPU 1 GPU instance at 5:1, outside any pod" in message


def test_a_gpu_pod_without_a_resource_request_holding_a_gi_through_a_process_is_refused_by_name(
    cluster: SimCluster, tmp_path: Path
) -> None:
    watch = NodeWatch(cluster)
    exporter = cluster.api.create_pod(
        node_name=cluster.config.node_name, namespace="monitoring", name="dcgm-exporter-abcde",
        labels={"app": "dcgm-exporter"}, owner_kind="DaemonSet", owner_name="dcgm-exporter",
    )
    uid = exporter["metadata"]["uid"]
    proc = tmp_path / "proc"
    slice_ = f"kubepods-besteffort-pod{uid.replace('-', '_')}.slice"
    _fake_proc(proc, 777, cgroup=f"0::/kubepods.slice/kubepods-besteffort.slice/{slice_}/cri-containerd-1.scope",
               command="dcgm-exporter")
    cluster.fake.sim_attach_process(cluster.mig_uuid(0, 4), pid=777, used_memory_bytes=1 << 20)
    cluster.kubelet.run_workload("ml", "moves", mig_uuid=cluster.mig_uuid(0, 5))  # would be evicted: is not

    message = _refused_untouched(cluster, watch, options=cluster.options(gate=GateSettings(proc_root=proc)))

    assert "pod monitoring/dcgm-exporter-abcde runs process 777 on GPU 0 GPU instance at 4:1" in message
    assert "requests no GPU device" in message


def test_a_pod_that_two_pdbs_select_is_refused_up_front(cluster: SimCluster) -> None:
    watch = NodeWatch(cluster)
    cluster.kubelet.run_workload("ml", "web-0", mig_uuid=cluster.mig_uuid(0, 6), labels={"app": "web", "tier": "x"})
    cluster.api.add_pdb("ml", "by-app", match_labels={"app": "web"}, disruptions_allowed=1)
    cluster.api.add_pdb("ml", "by-tier", match_labels={"tier": "x"}, disruptions_allowed=1)

    message = _refused_untouched(cluster, watch)

    assert "guarded by 2 PodDisruptionBudgets (ml/by-app, ml/by-tier)" in message


def test_min_available_50_percent_of_a_single_pod_is_refused_up_front(cluster: SimCluster) -> None:
    watch = NodeWatch(cluster)
    cluster.kubelet.run_workload("ml", "solo", mig_uuid=cluster.mig_uuid(1, 4), labels={"app": "solo"})
    cluster.api.add_pdb("ml", "half", match_labels={"app": "solo"}, disruptions_allowed=0)
    cluster.api.update_pdb("ml", "half", lambda pdb: pdb["spec"].__setitem__("minAvailable", "50%"))
    cluster.api.set_pdb_status(
        "ml", "half",
        {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1},
    )

    message = _refused_untouched(cluster, watch)

    assert "PodDisruptionBudget ml/half has minAvailable: 50% (1 pod(s)) with 1 pod(s) expected" in message


def test_an_unready_pod_under_always_allow_is_not_refused_by_its_blocking_budget(cluster: SimCluster) -> None:
    cluster.kubelet.run_workload("ml", "sick", mig_uuid=cluster.mig_uuid(1, 4), labels={"app": "sick"})
    cluster.api.update_pod(
        "ml", "sick", lambda pod: pod["status"].__setitem__("conditions", [{"type": "Ready", "status": "False"}])
    )
    cluster.api.add_pdb("ml", "strict", match_labels={"app": "sick"}, disruptions_allowed=0)
    cluster.api.update_pdb("ml", "strict", lambda pdb: pdb["spec"].update(
        {"maxUnavailable": 0, "unhealthyPodEvictionPolicy": "AlwaysAllow"}) or pdb["spec"].pop("minAvailable"))
    agent, _ = cluster.build_agent(cluster.options(drain_timeout_s=0.5))
    cluster.label("all-balanced")

    agent.reconcile_once()

    assert "maxUnavailable" not in condition(cluster)["message"], "refused up front although eviction is allowed"


def test_a_pod_with_emptydir_data_is_refused_by_name_unless_delete_emptydir_data(cluster: SimCluster) -> None:
    watch = NodeWatch(cluster)
    cluster.kubelet.run_workload("ml", "scratchy", mig_uuid=cluster.mig_uuid(0, 6))
    cluster.api.update_pod(
        "ml", "scratchy", lambda pod: pod["spec"].__setitem__("volumes", [{"name": "scratch", "emptyDir": {}}])
    )

    message = _refused_untouched(cluster, watch)
    assert "pod ml/scratchy: using emptyDir volume(s) scratch" in message
    assert "--delete-emptydir-data" in message

    allowed = cluster.options(gate=GateSettings(delete_emptydir_data=True))
    agent, _ = cluster.build_agent(allowed)
    assert agent.reconcile_once() is Outcome.APPLIED
    assert state(cluster) == "success"


def test_a_pod_terminating_past_its_grace_period_is_reported_and_never_evicted_again(cluster: SimCluster) -> None:
    cluster.kubelet.run_workload("ml", "stuck", mig_uuid=cluster.mig_uuid(0, 6))
    # Deleted long ago with a grace period that is over; its kubelet never finished it (a stuck finalizer).
    cluster.api.update_pod("ml", "stuck", lambda pod: pod["metadata"].update(
        {"deletionTimestamp": "2020-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30, "finalizers": ["x/y"]}))
    options = replace(cluster.options(drain_timeout_s=0.5))

    for _ in range(2):
        agent, _ = cluster.build_agent(options)
        cluster.label("all-balanced")
        assert agent.reconcile_once() is Outcome.FAILED
        # the retry time come: the next agent attempts again rather than holding
        cluster.api.update_node(
            cluster.config.node_name, lambda node: node["metadata"]["annotations"].pop(NEXT_RETRY_ANNOTATION, None)
        )

    assert _evictions(cluster) == 0
    assert "pod ml/stuck is Terminating" in condition(cluster)["message"]
    assert "past its grace period" in condition(cluster)["message"]
