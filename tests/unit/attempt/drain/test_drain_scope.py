from __future__ import annotations

from typing import Any

from migagent.attempt.drain.scope import disturbed_pods, evictable
from migagent.layout.observed import Observation
from migagent.node.port import PodView
from migagent_sim.doubles.builders import Holding, gpu_plan, mig_gpu, plan, pod

GPU0 = mig_gpu(0, [("3g.20gb", 0), ("2g.10gb", 4), ("1g.5gb", 6)])
GPU1 = mig_gpu(1, [("7g.40gb", 0)])
OBSERVATION = Observation(gpus=(GPU0, GPU1))
THREE_G, TWO_G, ONE_G = GPU0.gpu_instances
SEVEN_G = GPU1.gpu_instances[0]


def _uuid(gi_index: int, gpu: int = 0) -> str:
    gpu_obj = OBSERVATION.gpu(gpu)
    return gpu_obj.gpu_instances[gi_index].compute_instances[0].uuid


def _holding(name: str, *uuids: str, resource: str = "nvidia.com/mig-3g.20gb") -> Holding:
    return Holding(namespace="team", name=name, resource_name=resource, device_ids=uuids)


def _names(pods: list) -> list[str]:  # type: ignore[type-arg]
    return [p.ref.name for p in pods]


def test_only_pods_on_destroyed_gpu_instances_are_evicted() -> None:
    pods = [pod("on-3g"), pod("on-2g"), pod("on-1g"), pod("on-7g")]
    holdings = [
        _holding("on-3g", _uuid(0)),
        _holding("on-2g", _uuid(1)),
        _holding("on-1g", _uuid(2)),
        _holding("on-7g", _uuid(0, gpu=1)),
    ]
    chosen = _to_evict(
        plan(gpu_plan(0, destroy=[TWO_G, ONE_G], keep=[THREE_G])), OBSERVATION, holdings, pods
    )
    assert _names(chosen) == ["on-1g", "on-2g"]


def test_every_pod_on_a_gpu_that_is_reset_or_changes_mode_is_evicted() -> None:
    pods = [pod("on-3g"), pod("on-7g")]
    holdings = [_holding("on-3g", _uuid(0)), _holding("on-7g", _uuid(0, gpu=1))]
    reset = _to_evict(plan(gpu_plan(1, reset=True)), OBSERVATION, holdings, pods)
    mode = _to_evict(plan(gpu_plan(0, mode_change=False)), OBSERVATION, holdings, pods)
    assert _names(reset) == ["on-7g"]
    assert _names(mode) == ["on-3g"]


def test_a_gpu_pod_missing_from_pod_resources_counts_as_holding_every_gpu() -> None:
    pods = [pod("unknown", gpu_resources=["nvidia.com/mig-1g.5gb"]), pod("cpu-only")]
    chosen = _to_evict(plan(gpu_plan(1, destroy=[SEVEN_G])), OBSERVATION, [], pods)
    assert _names(chosen) == ["unknown"]


def test_a_pod_holding_a_device_the_observation_does_not_know_is_evicted_when_anything_is_disturbed() -> None:
    pods = [pod("stale")]
    holdings = [_holding("stale", "MIG-gone")]
    assert _names(_to_evict(plan(gpu_plan(1, destroy=[SEVEN_G])), OBSERVATION, holdings, pods)) == [
        "stale"
    ]


def test_a_plan_that_only_creates_instances_evicts_nobody() -> None:
    pods = [pod("unknown", gpu_resources=["nvidia.com/gpu"]), pod("on-3g")]
    holdings = [_holding("on-3g", _uuid(0))]
    assert _to_evict(plan(gpu_plan(0, keep=[THREE_G])), OBSERVATION, holdings, pods) == []


def test_daemonset_mirror_and_finished_pods_are_never_evicted() -> None:
    pods = [
        pod("plugin", owner="DaemonSet", gpu_resources=["nvidia.com/gpu"]),
        pod("static", owner=None, mirror=True, gpu_resources=["nvidia.com/gpu"]),
        pod("done", phase="Succeeded", gpu_resources=["nvidia.com/gpu"]),
        pod("job", gpu_resources=["nvidia.com/gpu"]),
    ]
    holdings = [_holding(name, _uuid(0)) for name in ("plugin", "static", "done", "job")]
    chosen = _to_evict(plan(gpu_plan(0, reset=True)), OBSERVATION, holdings, pods)
    assert _names(chosen) == ["job"]


def test_shared_device_replica_suffixes_and_whole_gpu_uuids_are_resolved() -> None:
    whole = mig_gpu(2, [], mig=False)
    observation = Observation(gpus=(GPU0, GPU1, whole))
    pods = [pod("shared"), pod("full")]
    holdings = [
        _holding("shared", f"{_uuid(2)}::3", resource="nvidia.com/mig-1g.5gb"),
        _holding("full", whole.uuid, resource="nvidia.com/gpu"),
    ]
    destroy_1g = _to_evict(plan(gpu_plan(0, destroy=[ONE_G])), observation, holdings, pods)
    enable_mig = _to_evict(plan(gpu_plan(2, mode_change=True)), observation, holdings, pods)
    assert _names(destroy_1g) == ["shared"]
    assert _names(enable_mig) == ["full"]


def test_devices_of_other_resources_do_not_make_a_pod_look_like_a_gpu_holder() -> None:
    pods = [pod("rdma")]
    holdings = [Holding(namespace="team", name="rdma", resource_name="rdma/hca", device_ids=("mlx5_0",))]
    assert _to_evict(plan(gpu_plan(0, reset=True)), OBSERVATION, holdings, pods) == []


def _to_evict(*args: Any) -> list[PodView]:
    """The pods the drain moves: those a plan disturbs that may be evicted."""
    return [pod for pod in disturbed_pods(*args) if evictable(pod)]
