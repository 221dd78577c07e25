"""MIG mode, GPU reset and node reboot: the simulator's activation model (docs/nvml.md §4).

SetMigMode records the pending mode and returns NVML's `activationStatus` (a return code that is
*returned*, not raised) saying whether the new mode became current:

* Ampere (`model.mode_change_needs_reset`): the change needs a GPU reset.
  - reset not supported (pass-through VM): RESET_REQUIRED; applied only by `sim_reboot`.
  - a client or process holds the GPU: IN_USE; pending until `sim_reset_gpu`.
  - idle, `ampere_auto_reset` False (default, the conservative model mig-parted plans for: it
    always compares current and pending and resets): SUCCESS, but the mode stays pending until
    `sim_reset_gpu`. Callers must read GetMigMode, never trust the status alone.
  - idle, `ampere_auto_reset` True (what a real idle A100 does: the driver's own reset succeeds):
    SUCCESS and current = mode.
* Hopper and later: applied at once when the GPU is idle (no client, no process; GIs cannot
  exist while changing mode); otherwise IN_USE and pending until idle-and-retry or a reset.

Disabling MIG while GIs exist raises NVMLError_InUse [?: behaviour with live GIs not captured;
mig-parted always destroys them first].
"""

from __future__ import annotations

from typing import Any

import pynvml

from migagent.sim.core import FakeCore, nvml_api
from migagent.sim.device_bus import index_by_bus_id
from migagent.sim.handles import HandleKind, nvml_error
from migagent.sim.state import MIG_DISABLE, MIG_ENABLE, SimGpu


class ModeApi(FakeCore):
    @nvml_api()
    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:  # noqa: N802
        """`[current, pending]`; NOT_SUPPORTED on a MIG device handle [?]."""
        target = self._target(device, HandleKind.DEVICE, HandleKind.MIG_DEVICE)
        if target.kind is HandleKind.MIG_DEVICE:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        gpu = self.state.gpus[target.gpu]
        return [gpu.mig_current, gpu.mig_pending]

    @nvml_api(mutates=True)
    def nvmlDeviceSetMigMode(self, device: Any, mode: int) -> int:  # noqa: N802
        """Returns activationStatus (see the module docstring); a MIG handle is INVALID_ARGUMENT."""
        index, gpu = self._physical(device)
        if mode not in (MIG_DISABLE, MIG_ENABLE):
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if mode == MIG_DISABLE and gpu.gpu_instances:
            raise nvml_error(pynvml.NVML_ERROR_IN_USE)
        gpu.mig_pending = mode
        was = gpu.mig_current
        status = self._activation_status(index, gpu)
        if gpu.mig_current != was:
            # nvml.h: the call "may unbind or reset the device" and the caller must query again. The
            # fake takes the strict reading [inf]: every handle of the GPU, its own included, is stale.
            self._handles.forget_gpu(index)
        return status

    def _gpu_busy(self, gpu: SimGpu) -> bool:
        return gpu.client_attached or bool(self._all_processes(gpu))

    def _activation_status(self, index: int, gpu: SimGpu) -> int:
        if gpu.mig_current == gpu.mig_pending:
            return int(pynvml.NVML_SUCCESS)
        if self.model(index).mode_change_needs_reset:
            if not gpu.reset_supported:
                return int(pynvml.NVML_ERROR_RESET_REQUIRED)
            if self._gpu_busy(gpu):
                return int(pynvml.NVML_ERROR_IN_USE)
            if gpu.ampere_auto_reset:
                gpu.mig_current = gpu.mig_pending
            return int(pynvml.NVML_SUCCESS)
        if self._gpu_busy(gpu):
            return int(pynvml.NVML_ERROR_IN_USE)
        gpu.mig_current = gpu.mig_pending
        return int(pynvml.NVML_SUCCESS)

    def sim_reset_gpu(self, pci_bus_id: str) -> None:
        """What `nvidia-smi -r -i <bus>` does: NVMLError_NotSupported where reset is unsupported,
        NVMLError_InUse while a client or process holds the GPU; otherwise every GI/CI is destroyed,
        the pending mode becomes current and every handle of the GPU (its own included) goes stale.
        A successful reset is logged in `sim_mutations` as "sim_reset_gpu".

        nvidia-smi refuses a reset while any other NVML client is attached (monitoring tools count,
        docs/nvml.md §4); the process that asks for the reset is such a client for as long as it
        has NVML initialised, so it must call nvmlShutdown first, as mig-parted does."""
        self._faults.check("sim_reset_gpu")
        index = index_by_bus_id(self.state, pci_bus_id)
        gpu = self.state.gpus[index]
        if not gpu.reset_supported:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if self.sim_nvml_clients > 0 or self._gpu_busy(gpu) or any(gi.held_by_client for gi in gpu.gpu_instances):
            raise nvml_error(pynvml.NVML_ERROR_IN_USE)
        gpu.gpu_instances.clear()
        gpu.mig_current = gpu.mig_pending
        self._handles.forget_gpu(index)
        self._mutated("sim_reset_gpu")

    def sim_reboot(self) -> None:
        """Power cycle: instances and processes are gone, Ampere keeps (and applies) its pending
        mode from the InfoROM, Hopper and later come back with MIG disabled; every handle is stale
        and NVML must be initialised again. Clients and per-GPU settings stay as configured."""
        for index, gpu in enumerate(self.state.gpus):
            gpu.gpu_instances.clear()
            gpu.processes.clear()
            if self.model(index).mig_mode_persists_across_reboot:
                gpu.mig_current = gpu.mig_pending
            else:
                gpu.mig_current = gpu.mig_pending = MIG_DISABLE
        self._handles.forget_all()
        self._init_count = 0
        self._notify_mutation_hooks("sim_reboot")  # not an NVML call, so not in `sim_mutations`
