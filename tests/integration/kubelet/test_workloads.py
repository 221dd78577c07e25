"""Workload pods: a pod in the apiserver, a process in FakeNvml, and the PodResources answer joining them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from migagent.podresources import PodDevices, PodResourcesClient
from migagent.sim import FakeNvml
from migagent_sim.apiserver import FakeApiServer
from migagent_sim.kubelet import FakeKubelet
from tests.integration.kubelet.support import NODE, GateClock, eventually, lay_out, processes_by_uuid


def test_a_workload_is_a_running_pod_on_the_node_requesting_its_mig_resource(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], core_v1: k8s.CoreV1Api
) -> None:
    lay_out(fake, 0, [("3g.40gb", 0)])
    kubelet = make_kubelet()

    kubelet.run_workload("ml", "train-0", profile="3g.40gb", labels={"app": "train"})

    pod = core_v1.read_namespaced_pod("train-0", "ml").to_dict(serialize=True)
    assert pod["spec"]["nodeName"] == NODE
    assert pod["status"]["phase"] == "Running"
    assert pod["metadata"]["labels"] == {"app": "train"}
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-3g.40gb": "1"}


def test_pod_resources_reports_which_pod_holds_which_mig_uuid_and_nvml_sees_its_process(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], socket_path: str
) -> None:
    first, second = lay_out(fake, 0, [("1g.10gb", 0), ("1g.10gb", 1)])
    kubelet = make_kubelet()

    kubelet.run_workload("ml", "infer-0", mig_uuid=second)

    assert PodResourcesClient(socket_path).list() == (
        PodDevices("ml", "infer-0", "main", "nvidia.com/mig-1g.10gb", (second,)),
    )
    processes = processes_by_uuid(fake)
    assert len(processes[second]) == 1
    assert processes[first] == []


def test_workloads_by_profile_take_different_free_devices_until_none_is_left(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet]
) -> None:
    uuids = lay_out(fake, 0, [("1g.10gb", 0), ("1g.10gb", 1), ("3g.40gb", 4)])
    kubelet = make_kubelet()

    kubelet.run_workload("ml", "a", profile="1g.10gb")
    kubelet.run_workload("ml", "b", profile="nvidia.com/mig-1g.10gb")

    assert sorted(w.device_uuid for w in kubelet.workloads()) == sorted(uuids[:2])
    assert len({w.pid for w in kubelet.workloads()}) == 2
    with pytest.raises(ValueError, match=r"no free MIG device of profile 1g.10gb .* free: nvidia.com/mig-3g.40gb"):
        kubelet.run_workload("ml", "c", profile="1g.10gb")


def test_an_unknown_mig_uuid_is_refused_naming_the_known_devices(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet]
) -> None:
    (only,) = lay_out(fake, 0, [("7g.80gb", 0)])
    kubelet = make_kubelet()

    with pytest.raises(ValueError, match=f"is not a device of node {NODE}; devices: .*{only}"):
        kubelet.run_workload("ml", "x", mig_uuid="MIG-00000000-0000-5000-8000-000000000000")
    assert processes_by_uuid(fake)[only] == []


def test_deleting_the_pod_ends_its_process_and_its_replicaset_creates_a_pending_replacement(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], api: FakeApiServer, socket_path: str
) -> None:
    (uuid,) = lay_out(fake, 0, [("3g.40gb", 0)])
    kubelet = make_kubelet()
    original = kubelet.run_workload("ml", "train-0", mig_uuid=uuid, labels={"app": "train"})

    api.delete_pod("ml", "train-0")

    assert processes_by_uuid(fake)[uuid] == []
    assert PodResourcesClient(socket_path).list() == ()
    (replacement,) = kubelet.replacements
    assert replacement["metadata"]["name"].startswith("train-0-")
    assert replacement["metadata"]["uid"] != original["metadata"]["uid"]
    assert replacement["metadata"]["labels"] == {"app": "train"}
    assert replacement["status"]["phase"] == "Pending"
    assert "nodeName" not in replacement["spec"]


def test_a_replacement_keeps_its_owner_and_gets_its_priority_class_value_again(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], api: FakeApiServer
) -> None:
    """Issue 37 item 13: on a cluster, admission resolves the ReplicaSet template's PriorityClass for
    the new pod as it did for the old one; an evicted pod's replacement must not rank below it."""
    (uuid,) = lay_out(fake, 0, [("3g.40gb", 0)])
    kubelet = make_kubelet()
    original = kubelet.run_workload("ml", "serve-0", mig_uuid=uuid)

    def admitted(pod: dict[str, Any]) -> None:
        pod["spec"].update(priority=1000, priorityClassName="serving")

    api.update_pod("ml", "serve-0", admitted)
    api.delete_pod("ml", "serve-0")

    (replacement,) = kubelet.replacements
    assert (replacement["spec"]["priority"], replacement["spec"]["priorityClassName"]) == (1000, "serving")
    assert replacement["metadata"]["ownerReferences"] == original["metadata"]["ownerReferences"]


def test_a_pod_without_an_owner_is_not_replaced(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], api: FakeApiServer
) -> None:
    lay_out(fake, 0, [("3g.40gb", 0)])
    kubelet = make_kubelet()
    kubelet.run_workload("ml", "bare", profile="3g.40gb", owner_kind=None)

    api.delete_pod("ml", "bare")

    assert kubelet.replacements == []
    assert api.pod("ml", "bare") is None


def test_evicting_the_pod_through_the_real_client_ends_its_process(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], core_v1: k8s.CoreV1Api
) -> None:
    (uuid,) = lay_out(fake, 0, [("7g.80gb", 0)])
    kubelet = make_kubelet()
    kubelet.run_workload("ml", "train-0", mig_uuid=uuid)

    eviction = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="train-0", namespace="ml"))
    core_v1.create_namespaced_pod_eviction("train-0", "ml", eviction)

    assert eventually(lambda: processes_by_uuid(fake)[uuid], until=lambda pids: pids == []) == []
    assert kubelet.workloads() == ()


def test_a_deleted_pod_keeps_no_device_so_a_new_workload_can_take_it(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], api: FakeApiServer
) -> None:
    (uuid,) = lay_out(fake, 0, [("7g.80gb", 0)])
    kubelet = make_kubelet()
    kubelet.run_workload("ml", "first", profile="7g.80gb")
    api.delete_pod("ml", "first")

    kubelet.run_workload("ml", "second", profile="7g.80gb")

    assert [w.device_uuid for w in kubelet.workloads()] == [uuid]


def test_an_evicted_pod_stays_terminating_and_keeps_its_device_in_pod_resources_until_it_is_gone(
    fake: FakeNvml,
    make_kubelet: Callable[..., FakeKubelet],
    core_v1: k8s.CoreV1Api,
    api: FakeApiServer,
    socket_path: str,
) -> None:
    (uuid,) = lay_out(fake, 0, [("7g.80gb", 0)])
    kubelet = make_kubelet()
    kubelet.run_workload("ml", "train-0", mig_uuid=uuid)
    # A long grace period (600 s, scaled to 6 s by the fixture) keeps the Terminating window open.
    api.update_pod("ml", "train-0", lambda pod: pod["spec"].__setitem__("terminationGracePeriodSeconds", 600))

    eviction = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="train-0", namespace="ml"))
    core_v1.create_namespaced_pod_eviction("train-0", "ml", eviction)

    terminating = core_v1.read_namespaced_pod("train-0", "ml").to_dict(serialize=True)["metadata"]
    assert terminating["deletionTimestamp"] is not None
    assert terminating["deletionGracePeriodSeconds"] == 600
    assert [pod.device_ids for pod in PodResourcesClient(socket_path).list()] == [(uuid,)]
    # A second delete with grace period 0 ends the wait, as `kubectl delete --force` does.
    core_v1.delete_namespaced_pod("train-0", "ml", grace_period_seconds=0)
    assert eventually(lambda: PodResourcesClient(socket_path).list(), until=lambda pods: pods == ()) == ()
    assert api.pod("ml", "train-0") is None


def test_a_workload_gets_its_device_through_the_plugins_allocate_and_pod_resources_shows_that_id(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet], socket_path: str
) -> None:
    uuids = lay_out(fake, 0, [("3g.40gb", 0), ("3g.40gb", 4)])
    kubelet = make_kubelet()

    pod = kubelet.run_workload("ml", "train", mig_uuid=uuids[1])

    (entry,) = kubelet.device_manager.pod_devices()
    assert (entry.pod_uid, entry.resource, entry.device_ids) == (pod["metadata"]["uid"], "nvidia.com/mig-3g.40gb",
                                                                 (uuids[1],))
    assert entry.envs == {"NVIDIA_VISIBLE_DEVICES": uuids[1]}
    assert [e.device_ids for e in PodResourcesClient(socket_path).list()] == [(uuids[1],)]


def test_a_restarted_kubelet_reads_zero_until_the_plugin_registers_again(
    fake: FakeNvml, make_kubelet: Callable[..., FakeKubelet]
) -> None:
    lay_out(fake, 0, [("7g.80gb", 0)])
    clock = GateClock()
    kubelet = make_kubelet(plugin_lag_s=30.0, clock=clock)
    clock.release()
    eventually(kubelet.advertised, until=lambda adv: adv == {"nvidia.com/mig-7g.80gb": 1})
    clock.hold()

    kubelet.restart()

    assert kubelet.advertised() == {"nvidia.com/mig-7g.80gb": 0}
    clock.release()
    eventually(kubelet.advertised, until=lambda adv: adv == {"nvidia.com/mig-7g.80gb": 1})
    assert kubelet.registration.registrations == ["nvidia.com/mig-7g.80gb"], "the new kubelet's own record"
