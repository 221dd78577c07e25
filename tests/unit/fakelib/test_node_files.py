"""The driver's files for a simulated node (migagent_sim.gpu_node.files): the numbers the tools
compute with, as the driver lays them out."""

from __future__ import annotations

from migagent.sim.fake_nvml import FakeNvml
from migagent_sim.gpu_node.devices import proc_devices
from migagent_sim.gpu_node.files import GpuFacts, ci_cap_minor, config_space, gi_cap_minor, mig_minors
from migagent_sim.gpu_node.node_gpus import gpu_facts


def test_mig_capability_minors_follow_the_drivers_layout() -> None:
    """config 1, monitor 2, then per GPU 15 GIs of (access, ci0..ci7): nine minors per GI."""
    assert (gi_cap_minor(0, 0), ci_cap_minor(0, 0, 0), ci_cap_minor(0, 0, 7), gi_cap_minor(0, 1)) == (3, 4, 11, 12)
    assert gi_cap_minor(1, 0) == 3 + 135
    gpu = GpuFacts(index=1, name="x", uuid="GPU-x", address="0000:19:00.0", device_id=0x2330, subsystem=0x233010DE)
    lines = mig_minors([gpu]).splitlines()
    assert lines[:3] == ["config 1", "monitor 2", "gpu1/gi0/access 138"]
    assert lines[-1] == f"gpu1/gi14/ci7/access {ci_cap_minor(1, 14, 7)}"


def test_the_facts_come_from_the_node_and_the_config_space_says_them() -> None:
    (gpu,) = gpu_facts(FakeNvml.from_spec("A30-24GB").state)
    assert (gpu.address, gpu.device_id, gpu.subsystem, gpu.name) == ("0000:18:00.0", 0x20B7, 0x20B710DE, "NVIDIA A30")
    config = config_space(gpu)
    assert (int.from_bytes(config[0:2], "little"), int.from_bytes(config[2:4], "little")) == (0x10DE, 0x20B7)
    assert config[9:12] == bytes([0x00, 0x02, 0x03]), "class 0x030200: a 3D controller"
    assert config[6] & 0x10, "a capability list"
    assert (config[0x34], config[0x60], config[0x61]) == (0x60, 0x01, 0), "power management only: no vGPU"


def test_proc_devices_lists_the_drivers_character_devices_with_the_hosts() -> None:
    host = "Character devices:\n  1 mem\n  5 /dev/tty\n\nBlock devices:\n  8 sd\n"
    lines = proc_devices(host).splitlines()
    assert lines[:4] == ["Character devices:", "195 nvidia-frontend", "508 nvidia-caps", "509 nvidia-uvm"]
    assert lines[4:] == ["  1 mem", "  5 /dev/tty", "", "Block devices:", "  8 sd"]
