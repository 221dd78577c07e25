"""The simulated node's state: JSON round trip and atomic save."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pynvml
import pytest

from migagent.sim import FakeNvml, SimNodeState
from migagent.sim.state import StateFormatError
from tests.unit.sim.helpers import create_gi


def observe(fake: FakeNvml) -> list[dict[str, Any]]:
    """Everything a caller can see through pynvml, per GPU."""
    seen = []
    for index in range(fake.nvmlDeviceGetCount()):
        device = fake.nvmlDeviceGetHandleByIndex(index)
        gpu: dict[str, Any] = {"uuid": fake.nvmlDeviceGetUUID(device), "mode": fake.nvmlDeviceGetMigMode(device)}
        gpu["processes"] = sorted(
            (p.pid, p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId)
            for p in fake.nvmlDeviceGetComputeRunningProcesses(device)
        )
        mig = []
        for slot in range(fake.nvmlDeviceGetMaxMigDeviceCount(device)):
            try:
                handle = fake.nvmlDeviceGetMigDeviceHandleByIndex(device, slot)
            except pynvml.NVMLError_NotFound:  # an empty slot
                continue
            gi = fake.nvmlDeviceGetGpuInstanceById(device, fake.nvmlDeviceGetGpuInstanceId(handle))
            gi_info = fake.nvmlGpuInstanceGetInfo(gi)
            mig.append((
                fake.nvmlDeviceGetUUID(handle),
                fake.nvmlDeviceGetName(handle),
                gi_info.id, gi_info.profileId, gi_info.placement.start, gi_info.placement.size,
                fake.nvmlDeviceGetComputeInstanceId(handle),
            ))
        gpu["mig"] = mig
        seen.append(gpu)
    return seen


def mutated_node() -> FakeNvml:
    fake = FakeNvml.from_spec("A100-40GB,H100-80GB-SXM,A30-24GB", gi_id_map="xor4")
    fake.nvmlInit()
    a100, h100, a30 = (fake.nvmlDeviceGetHandleByIndex(i) for i in range(3))
    fake.sim_set_client_attached(0, True)
    fake.nvmlDeviceSetMigMode(a100, 1)  # stays pending: a client is attached
    fake.sim_attach_process(fake.nvmlDeviceGetUUID(a30), pid=500, used_memory_bytes=7)
    fake.nvmlDeviceSetMigMode(h100, 1)
    gi = create_gi(fake, h100, 9, 4, 4)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    fake.nvmlGpuInstanceCreateComputeInstance(fake.nvmlDeviceCreateGpuInstance(h100, 19), 0)
    mig = fake.nvmlDeviceGetMigDeviceHandleByIndex(h100, 1)
    fake.sim_attach_process(fake.nvmlDeviceGetUUID(mig), pid=42, used_memory_bytes=1 << 30)
    fake.sim_set_gpu_instance_held(1, 1, True)
    fake.sim_set_reset_supported(2, False)
    return fake


def test_a_saved_node_loads_back_identical(tmp_path: Path) -> None:
    fake = mutated_node()
    path = tmp_path / "node.json"
    fake.save(path)
    loaded = FakeNvml.load(path)
    loaded.nvmlInit()
    assert observe(loaded) == observe(fake)
    assert loaded.state == fake.state
    assert loaded.state.gi_id_map == "xor4"


def test_state_dicts_round_trip_exactly() -> None:
    state = mutated_node().state
    assert SimNodeState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_a_loaded_node_keeps_creating_fresh_mig_uuids(tmp_path: Path) -> None:
    fake = mutated_node()
    fake.save(tmp_path / "node.json")
    loaded = FakeNvml.load(tmp_path / "node.json")
    loaded.nvmlInit()
    device = loaded.nvmlDeviceGetHandleByIndex(1)
    gi = loaded.nvmlDeviceCreateGpuInstance(device, 19)
    loaded.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    uuids = [ci.uuid for g in loaded.state.gpus[1].gpu_instances for ci in g.compute_instances]
    assert len(uuids) == len(set(uuids)) == 4


def test_save_replaces_the_file_atomically_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "state" / "node.json"
    fake = mutated_node()
    fake.save(path)
    fake.sim_reboot()
    fake.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["node.json"]
    assert FakeNvml.load(path).state.gpus[1].gpu_instances == []


def test_a_state_file_that_is_not_json_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "node.json"
    path.write_text("{nope")
    with pytest.raises(StateFormatError, match=r"node\.json is not JSON"):
        FakeNvml.load(path)


def test_a_malformed_state_names_the_bad_field() -> None:
    raw = mutated_node().state.to_dict()
    raw["gpus"][1]["gpu_instances"][0]["placement"] = [4]
    with pytest.raises(StateFormatError, match=r"gpus\[1\]\.gpu_instances\[0\]\.placement"):
        SimNodeState.from_dict(raw)
    raw = mutated_node().state.to_dict()
    del raw["gpus"][0]["mig_pending"]
    with pytest.raises(StateFormatError, match=r"gpus\[0\] lacks field 'mig_pending'"):
        SimNodeState.from_dict(raw)
    raw["format_version"] = 2
    with pytest.raises(StateFormatError, match="format_version"):
        SimNodeState.from_dict(raw)
