"""Pure parts of issue 14's checks: a process's pod from its cgroup, DynamicMIG in ResourceSlices,
and the MIG strategy the device plugin's advertisement proves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from migagent.attempt.drain.gpu_processes import command_of, pod_uid_of
from migagent.attempt.preflight import advertised_strategy
from migagent.layout.observed import Observation
from migagent.layout.sharing import Advertised
from migagent.layout.strategy import MigStrategy
from migagent.node.owners import dynamic_mig_devices, strategy_of_policy

UID = "0f3c2a1b-9d8e-4f7a-b6c5-1234567890ab"


@pytest.mark.parametrize(
    "cgroup",
    [
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}.slice/cri-x.scope",
        f"12:devices:/kubepods/besteffort/pod{UID}/3f1e",
        f"0::/kubepods/pod{UID}/abc",
    ],
)
def test_the_pod_uid_is_read_from_systemd_and_cgroupfs_paths(tmp_path: Path, cgroup: str) -> None:
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "cgroup").write_text(cgroup + "\n")
    assert pod_uid_of(7, tmp_path) == (True, UID)


def test_a_host_process_is_visible_without_a_pod_and_an_absent_pid_is_not_visible(tmp_path: Path) -> None:
    (tmp_path / "8").mkdir()
    (tmp_path / "8" / "cgroup").write_text("0::/system.slice/nvidia-persistenced.service\n")
    (tmp_path / "8" / "cmdline").write_bytes(b"/usr/bin/nvidia-persistenced\0--verbose\0")
    assert pod_uid_of(8, tmp_path) == (True, None)
    assert command_of(8, tmp_path) == "/usr/bin/nvidia-persistenced --verbose"
    assert pod_uid_of(9, tmp_path) == (False, None)


def _slice(*devices: Any) -> dict[str, Any]:
    return {"spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "devices": list(devices)}}


def test_dynamic_mig_is_a_mig_device_that_consumes_counters_or_has_no_uuid_yet() -> None:
    static: dict[str, Any] = {"name": "mig-a", "attributes": {"type": {"string": "mig"}, "uuid": {"string": "MIG-1"}}}
    gpu = {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-1"}}}
    no_uuid = {"name": "mig-b", "attributes": {"type": {"string": "mig"}}}
    counters = {
        "name": "mig-c",
        "attributes": {"gpu.nvidia.com/type": {"string": "mig"}, "uuid": {"string": "MIG-2"}},
        "consumesCounters": [{"counterSet": "gpu-0"}],
    }
    assert dynamic_mig_devices([_slice(static, gpu)]) == []
    assert dynamic_mig_devices([_slice(static, no_uuid), _slice(counters)]) == ["mig-b", "mig-c"]


def test_the_cluster_policy_strategy_is_read_and_an_unknown_one_ignored() -> None:
    assert strategy_of_policy({"spec": {"mig": {"strategy": "mixed"}}}) is MigStrategy.MIXED
    assert strategy_of_policy({"spec": {"mig": {"strategy": "weird"}}}) is None
    assert strategy_of_policy(None) is None


def test_advertised_mig_resources_prove_mixed_and_nothing_advertised_proves_nothing() -> None:
    def never() -> Observation:
        raise AssertionError("NVML need not be asked")

    assert advertised_strategy({"nvidia.com/mig-1g.10gb": 7}, never) is MigStrategy.MIXED
    assert advertised_strategy({"nvidia.com/mig-1g.10gb": 0, "nvidia.com/gpu": 0}, never) is None


def test_a_replicated_gpu_count_proves_a_strategy_only_divided_by_its_replicas() -> None:
    """Found against NVIDIA's plugin (tests/nvidia): `none` with nvidia.com/gpu x4 on two GPUs holding
    eight MIG devices advertises 8, which read as plain devices would prove `single`."""
    from migagent_sim.doubles.builders import mig_gpu

    def observe() -> Observation:
        layout = [("1g.5gb", 0), ("1g.5gb", 1), ("2g.10gb", 2), ("3g.20gb", 4)]
        return Observation(gpus=(mig_gpu(0, layout), mig_gpu(1, layout)))

    allocatable = {"nvidia.com/gpu": 8}
    assert advertised_strategy(allocatable, observe) is MigStrategy.SINGLE  # as if nothing were replicated
    assert advertised_strategy(allocatable, observe, gpu=Advertised("nvidia.com/gpu", 4)) is MigStrategy.NONE
    assert advertised_strategy(allocatable, observe, gpu=None) is None, "sharing unknown: proves nothing"
