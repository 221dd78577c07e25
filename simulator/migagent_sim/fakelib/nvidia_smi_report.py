"""What the fake `nvidia-smi` prints without a reset: the summary (no option; mig-manager's
reconfigure-mig.sh runs it so the driver creates the MIG capability device nodes) and `-L`. Read
through FakeNvml's NVML calls, as the real tool reads NVML."""

from __future__ import annotations

from typing import Any

import pynvml

from migagent.sim.fake_nvml import FakeNvml

_RULE = "+" + "-" * 89 + "+"


def _mig_devices(fake: FakeNvml, device: Any) -> list[Any]:
    current, _pending = fake.nvmlDeviceGetMigMode(device)
    if current != pynvml.NVML_DEVICE_MIG_ENABLE:
        return []
    found = []
    for index in range(fake.nvmlDeviceGetMaxMigDeviceCount(device)):
        try:
            found.append(fake.nvmlDeviceGetMigDeviceHandleByIndex(device, index))
        except pynvml.NVMLError_NotFound:
            continue
    return found


def _devices(fake: FakeNvml) -> list[Any]:
    return [fake.nvmlDeviceGetHandleByIndex(i) for i in range(fake.nvmlDeviceGetCount())]


def gpu_list(fake: FakeNvml) -> str:
    """`nvidia-smi -L`: each GPU with its UUID, then its MIG devices."""
    lines = []
    for index, device in enumerate(_devices(fake)):
        lines.append(f"GPU {index}: {fake.nvmlDeviceGetName(device)} (UUID: {fake.nvmlDeviceGetUUID(device)})")
        for number, mig in enumerate(_mig_devices(fake, device)):
            profile = fake.nvmlDeviceGetName(mig).split(" MIG ", 1)[-1]
            lines.append(f"  MIG {profile:<12} Device {number:2d}: (UUID: {fake.nvmlDeviceGetUUID(mig)})")
    return "\n".join(lines)


def summary(fake: FakeNvml) -> str:
    """The versions, one row per GPU (name, bus id, memory, MIG mode) and the MIG devices."""
    driver = fake.nvmlSystemGetDriverVersion()
    cuda = fake.nvmlSystemGetCudaDriverVersion()
    lines = [_RULE, f"| NVIDIA-SMI {driver} (simulated)   Driver Version: {driver}   CUDA Version: "
             f"{cuda // 1000}.{cuda % 1000 // 10}".ljust(90) + "|", _RULE]  # fmt: skip
    mig_rows = []
    for index, device in enumerate(_devices(fake)):
        memory = fake.nvmlDeviceGetMemoryInfo(device)
        current, _pending = fake.nvmlDeviceGetMigMode(device)
        bus = fake.nvmlDeviceGetPciInfo(device).busId
        mode = "Enabled" if current == pynvml.NVML_DEVICE_MIG_ENABLE else "Disabled"
        name = fake.nvmlDeviceGetName(device)
        row = f"| {index:3d}  {name:<30} {bus}  {memory.used >> 20:>6}MiB / {memory.total >> 20}MiB"
        lines.append(f"{row}  MIG {mode}".ljust(90) + "|")
        for mig in _mig_devices(fake, device):
            gi, ci = fake.nvmlDeviceGetGpuInstanceId(mig), fake.nvmlDeviceGetComputeInstanceId(mig)
            mig_rows.append(f"| {index:3d}  GI {gi:2d}  CI {ci:2d}  {fake.nvmlDeviceGetName(mig)}".ljust(90) + "|")
    lines.append(_RULE)
    if mig_rows:
        lines += ["| MIG devices:".ljust(90) + "|", *mig_rows, _RULE]
    return "\n".join(lines)
