"""The fake nvidia-smi next to the library: `-r -i BUS` resets a simulated GPU, and, like the
real tool, refuses while another process holds NVML initialised or runs on the GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pynvml

from migagent.sim.fake_nvml import FakeNvml
from migagent.sim.state import pci_bus_id
from tests.integration.fakelib.support import library_env, nvidia_smi

HOLD_NVML = (
    "import sys, pynvml\n"
    "pynvml.nvmlInit()\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
    "pynvml.nvmlShutdown()\n"
)
BUS = pci_bus_id(0)


def _node_with_pending_mig(state: Path) -> None:
    """GPU 0 asks for MIG mode, pending until a reset (Ampere)."""
    fake = FakeNvml.from_spec("2xA100-80GB")
    fake.state.gpus[0].mig_pending = pynvml.NVML_DEVICE_MIG_ENABLE
    fake.save(state)


def _holder(env: dict[str, str]) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_NVML], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "ready"
    return holder


def _mig_current(state: Path) -> int:
    return FakeNvml.load(state).state.gpus[0].mig_current


def test_reset_is_refused_while_another_process_holds_nvml_and_succeeds_after_its_shutdown(
    fake_nvml_dir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "node.json"
    _node_with_pending_mig(state)
    env = library_env(fake_nvml_dir, state)
    holder = _holder(env)
    try:
        refused = nvidia_smi(fake_nvml_dir, env, "-r", "-i", BUS)
        assert refused.returncode == pynvml.NVML_ERROR_IN_USE
        assert "in use by another process" in refused.stderr
        assert f"pids {holder.pid}" in refused.stderr
        assert _mig_current(state) == pynvml.NVML_DEVICE_MIG_DISABLE, "a refused reset changes nothing"
    finally:
        holder.communicate("done\n", timeout=60)
    reset = nvidia_smi(fake_nvml_dir, env, "-r", "-i", BUS)
    assert reset.returncode == 0, reset.stderr
    assert f"GPU {BUS} was successfully reset." in reset.stdout
    assert _mig_current(state) == pynvml.NVML_DEVICE_MIG_ENABLE


def test_a_client_killed_without_nvml_shutdown_does_not_hold_the_gpu(fake_nvml_dir: Path, tmp_path: Path) -> None:
    state = tmp_path / "node.json"
    _node_with_pending_mig(state)
    env = library_env(fake_nvml_dir, state)
    holder = _holder(env)
    holder.kill()
    holder.communicate(timeout=60)
    reset = nvidia_smi(fake_nvml_dir, env, "-r", "-i", BUS)
    assert reset.returncode == 0, reset.stderr


def test_reset_is_refused_while_a_process_runs_on_the_gpu(fake_nvml_dir: Path, tmp_path: Path) -> None:
    state = tmp_path / "node.json"
    fake = FakeNvml.from_spec("2xA100-80GB")
    fake.sim_attach_process(fake.state.gpus[0].uuid, pid=4242)
    fake.save(state)
    refused = nvidia_smi(fake_nvml_dir, library_env(fake_nvml_dir, state), "-r", "-i", BUS)
    assert refused.returncode == pynvml.NVML_ERROR_IN_USE
    assert "being used by one or more other processes" in refused.stderr


def test_an_unknown_bus_id_or_option_is_refused(fake_nvml_dir: Path, tmp_path: Path) -> None:
    state = tmp_path / "node.json"
    FakeNvml.from_spec("A100-80GB").save(state)
    env = library_env(fake_nvml_dir, state)
    missing = nvidia_smi(fake_nvml_dir, env, "-r", "-i", "00000000:99:00.0")
    assert missing.returncode == pynvml.NVML_ERROR_NOT_FOUND
    assert "No GPU with PCI bus id 00000000:99:00.0" in missing.stderr
    assert nvidia_smi(fake_nvml_dir, env, "-q").returncode == 2  # argparse: an option not simulated


def test_the_summary_and_the_list_show_each_gpu_and_mig_device(fake_nvml_dir: Path, tmp_path: Path) -> None:
    """What mig-manager's reconfigure-mig.sh runs (`nvidia-smi`, its status checked) and `-L`."""
    state = tmp_path / "node.json"
    fake = FakeNvml.from_spec("2xA100-80GB", mig_enabled=True)
    fake.nvmlInit()
    device = fake.nvmlDeviceGetHandleByIndex(1)
    gi = fake.nvmlDeviceCreateGpuInstance(device, fake.nvmlDeviceGetGpuInstanceProfileInfo(device, 0).id)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    fake.save(state)
    env = library_env(fake_nvml_dir, state)
    summary = nvidia_smi(fake_nvml_dir, env)
    assert summary.returncode == 0, summary.stderr
    assert "Driver Version: 580.65.06" in summary.stdout
    assert "NVIDIA A100-SXM4-80GB MIG 1g.10gb" in summary.stdout
    listed = nvidia_smi(fake_nvml_dir, env, "-L")
    assert listed.returncode == 0, listed.stderr
    gpus, ci = fake.state.gpus, fake.state.gpus[1].gpu_instances[0].compute_instances[0]
    assert listed.stdout.splitlines() == [
        f"GPU 0: NVIDIA A100-SXM4-80GB (UUID: {gpus[0].uuid})",
        f"GPU 1: NVIDIA A100-SXM4-80GB (UUID: {gpus[1].uuid})",
        f"  MIG 1g.10gb      Device  0: (UUID: {ci.uuid})",
    ]
