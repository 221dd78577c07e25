"""What blocks `nvidia-smi -r` is found before the reset, each with its reason and fix, from a host
root the test builds (its /proc and /sys)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from migagent.catalog import Placement
from migagent.errors import InUseError
from migagent.nvml import GpuDriver
from migagent.nvml.reset import NvidiaSmiResetRunner
from migagent.nvml.reset_checks import PERSISTENCED_SOCKET, HostResetChecks
from migagent.sim import FakeNvml
from migagent.sim.reset import SimResetRunner


def _holder(root: Path, pid: int, command: str, device: str) -> None:
    fd = root / "proc" / str(pid) / "fd"
    fd.mkdir(parents=True)
    (root / "proc" / str(pid) / "comm").write_text(f"{command}\n")
    os.symlink(device, fd / "3")
    os.symlink("/dev/null", fd / "0")


def test_a_clean_host_has_no_blockers(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/modules").write_text("nvidia_uvm 1 0 - Live 0x0\nnvidia 2 1 nvidia_uvm, Live 0x0\n")
    _holder(tmp_path, 10, "bash", "/dev/pts/0")
    assert HostResetChecks(tmp_path, own_pid=1).blockers(persistence_mode_on=()) == []


@pytest.mark.parametrize("where", ["proc/modules", "sys/module"])
def test_a_loaded_nvidia_drm_is_a_blocker_with_rmmod_as_its_fix(tmp_path: Path, where: str) -> None:
    if where == "proc/modules":
        (tmp_path / "proc").mkdir()
        (tmp_path / "proc/modules").write_text("nvidia_drm 94208 2 - Live 0x0\nnvidia 1 1 nvidia_drm, Live 0x0\n")
    else:
        (tmp_path / "sys/module/nvidia_drm").mkdir(parents=True)
    (blocker,) = HostResetChecks(tmp_path, own_pid=1).blockers()
    assert "nvidia_drm" in blocker.reason
    assert "rmmod nvidia_drm" in blocker.fix


def test_processes_on_dev_nvidia_are_named_by_pid_and_command_but_not_this_one(tmp_path: Path) -> None:
    _holder(tmp_path, 4321, "nv-hostengine", "/dev/nvidia0")
    _holder(tmp_path, 77, "python3", "/dev/nvidiactl")
    _holder(tmp_path, 1, "migagent", "/dev/nvidia0")  # this process
    (blocker,) = HostResetChecks(tmp_path, own_pid=1).blockers()
    assert blocker.reason == "processes hold /dev/nvidia*: pid 77 (python3), pid 4321 (nv-hostengine)"
    assert "stop them" in blocker.fix


def test_persistence_mode_without_a_reachable_persistenced_socket_is_a_blocker(tmp_path: Path) -> None:
    checks = HostResetChecks(tmp_path, own_pid=1)
    (blocker,) = checks.blockers(persistence_mode_on=["00000000:18:00.0"])
    assert "persistence mode is on for GPU 00000000:18:00.0" in blocker.reason
    assert "nvidia-smi -pm 0 -i 00000000:18:00.0" in blocker.fix

    path = tmp_path / PERSISTENCED_SOCKET
    path.parent.mkdir(parents=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)
        assert checks.blockers(persistence_mode_on=["00000000:18:00.0"]) == []


def test_the_driver_refuses_a_reset_the_host_would_block_and_touches_nothing(tmp_path: Path) -> None:
    (tmp_path / "sys/module/nvidia_drm").mkdir(parents=True)
    fake = FakeNvml.from_spec("A100-80GB", mig_enabled=True)
    fake.sim_persistence_mode = 1
    driver = GpuDriver(fake, reset_runner=SimResetRunner(fake), reset_checks=HostResetChecks(tmp_path, own_pid=1))
    gi_id = driver.create_gpu_instance(0, profile_id=0, placement=Placement(0, 8))
    driver.create_compute_instance(0, gi_id=gi_id, profile_id=0, placement=Placement(0, 1))
    with pytest.raises(InUseError) as refused:
        driver.reset_gpu(0)
    message = str(refused.value)
    assert "nvidia_drm" in message
    assert "persistence mode is on" in message
    assert len(driver.observe().gpu(0).gpu_instances) == 1, "the reset did not run"


def test_gpus_reset_together_go_in_one_nvidia_smi_command() -> None:
    ran: list[list[str]] = []

    class _Done:
        returncode = 0
        stdout = "All done."
        stderr = ""

    def run(argv: object) -> _Done:
        ran.append(list(argv))  # type: ignore[call-overload]
        return _Done()

    NvidiaSmiResetRunner(run=run).reset_together(["00000000:18:00.0", "00000000:19:00.0"])
    assert ran == [["nvidia-smi", "-r", "-i", "00000000:18:00.0,00000000:19:00.0"]]
