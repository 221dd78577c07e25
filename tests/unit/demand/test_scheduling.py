"""Whether a pod may run on a node, as the scheduler's filters decide it, and what a pod requests."""

from __future__ import annotations

import pytest

from migagent.node.port import PodRef
from migagent.node.scheduling import (
    DemandPod,
    NodeSelectorTerm,
    Requirement,
    Taint,
    Toleration,
    gpu_requests,
    is_mig_demand,
)

LABELS = {"pool": "h100", "zone": "a", "gpus": "8", "kubernetes.io/hostname": "gpu-1"}


def pod(**fields: object) -> DemandPod:
    return DemandPod(ref=PodRef("ml", "p"), requests={"nvidia.com/mig-1g.10gb": 1}, **fields)  # type: ignore[arg-type]


def test_a_node_selector_must_match_every_label_it_names() -> None:
    assert pod(node_selector={"pool": "h100"}).may_run_on("gpu-1", LABELS, ()) is None
    refused = pod(node_selector={"pool": "a100", "zone": "a"}).may_run_on("gpu-1", LABELS, ())
    assert refused == "nodeSelector pool=a100 does not match"


@pytest.mark.parametrize(
    ("requirement", "allowed"),
    [
        (Requirement("zone", "In", ("a", "b")), True),
        (Requirement("zone", "In", ("b",)), False),
        (Requirement("zone", "NotIn", ("b",)), True),
        (Requirement("missing", "NotIn", ("b",)), True),
        (Requirement("zone", "Exists"), True),
        (Requirement("zone", "DoesNotExist"), False),
        (Requirement("gpus", "Gt", ("4",)), True),
        (Requirement("gpus", "Lt", ("4",)), False),
        (Requirement("zone", "Gt", ("4",)), False),
    ],
    ids=str,
)
def test_required_node_affinity_operators(requirement: Requirement, allowed: bool) -> None:
    term = NodeSelectorTerm(expressions=(requirement,))
    assert (pod(affinity=(term,)).may_run_on("gpu-1", LABELS, ()) is None) is allowed


def test_affinity_terms_are_ored_and_match_fields_name_the_node() -> None:
    wrong_zone = NodeSelectorTerm(expressions=(Requirement("zone", "In", ("b",)),))
    by_name = NodeSelectorTerm(fields=(Requirement("metadata.name", "In", ("gpu-1",)),))
    assert pod(affinity=(wrong_zone, by_name)).may_run_on("gpu-1", LABELS, ()) is None
    refused = pod(affinity=(wrong_zone, by_name)).may_run_on("gpu-2", LABELS, ())
    assert refused == "required node affinity does not match"
    assert pod(affinity=(NodeSelectorTerm(),)).may_run_on("gpu-1", LABELS, ()) is not None


def test_no_schedule_and_no_execute_taints_need_a_toleration_prefer_no_schedule_does_not() -> None:
    gpu_taint = Taint("nvidia.com/gpu", "NoSchedule", "present")
    assert pod().may_run_on("gpu-1", LABELS, (Taint("x", "PreferNoSchedule"),)) is None
    assert pod().may_run_on("gpu-1", LABELS, (gpu_taint,)) == "taint nvidia.com/gpu=present:NoSchedule is not tolerated"
    assert pod(tolerations=(Toleration("nvidia.com/gpu", "Exists"),)).may_run_on("gpu-1", LABELS, (gpu_taint,)) is None
    equal = Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule")
    assert pod(tolerations=(equal,)).may_run_on("gpu-1", LABELS, (gpu_taint,)) is None
    other_effect = Toleration("nvidia.com/gpu", "Equal", "present", "NoExecute")
    assert pod(tolerations=(other_effect,)).may_run_on("gpu-1", LABELS, (gpu_taint,)) is not None
    assert pod(tolerations=(Toleration(operator="Exists"),)).may_run_on("gpu-1", LABELS, (gpu_taint,)) is None


def test_requests_sum_the_containers_and_take_the_largest_init_container() -> None:
    containers = [{"nvidia.com/mig-1g.10gb": 1, "cpu": 2}, {"nvidia.com/mig-1g.10gb": 1}]
    inits = [{"nvidia.com/mig-1g.10gb": 3}, {"nvidia.com/mig-3g.40gb": 1}]
    assert gpu_requests(containers, inits) == {"nvidia.com/mig-1g.10gb": 3, "nvidia.com/mig-3g.40gb": 1}
    assert is_mig_demand({"nvidia.com/gpu": 1})
    assert not is_mig_demand({"nvidia.com/gpu.shared": 1})


def test_a_pod_no_drain_can_move_is_named_as_such() -> None:
    assert pod(owner_kinds=("DaemonSet",)).movable == "a DaemonSet pod"
    assert pod(is_mirror=True, owner_kinds=("Node",)).movable == "a static (mirror) pod"
    assert pod().movable == "a pod without a controller (nothing would recreate it)"
    assert pod(owner_kinds=("ReplicaSet",)).movable is None
