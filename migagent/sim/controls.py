"""Simulator controls (`sim_*`): what tests and the simulated world do to the node besides NVML calls.

Bad input raises ValueError naming the argument (these are not NVML calls, so not NVMLError).
"""

from __future__ import annotations

from migagent.sim.core import FakeCore, sim_error
from migagent.sim.state import SimComputeInstance, SimGpu, SimProcess


class SimControls(FakeCore):
    def sim_attach_process(self, mig_uuid: str, *, pid: int, used_memory_bytes: int | None = 0) -> None:
        """Start a process on the MIG device `mig_uuid` (or, with MIG disabled, on a `GPU-` UUID).

        `used_memory_bytes=None`: NVML cannot tell how much memory it uses (NVML_VALUE_NOT_AVAILABLE)."""
        if pid <= 0 or (used_memory_bytes is not None and used_memory_bytes < 0):
            raise sim_error(f"pid must be positive and used_memory_bytes >= 0, got pid={pid}, {used_memory_bytes}")
        if self._find_process(pid) is not None:
            raise sim_error(f"pid {pid} is already attached to a GPU of this node; detach it first")
        self._process_list(mig_uuid).append(SimProcess(pid, used_memory_bytes))

    def _process_list(self, uuid: str) -> list[SimProcess]:
        for gpu in self.state.gpus:
            if gpu.uuid == uuid:
                if self._mig_enabled(gpu):
                    raise sim_error(f"GPU {uuid} is in MIG mode: attach the process to one of its MIG- UUIDs")
                return gpu.processes
            ci = _ci_by_uuid(gpu, uuid)
            if ci is not None:
                return ci.processes
        raise sim_error(f"no GPU or MIG device with UUID {uuid!r} on this node")

    def _find_process(self, pid: int) -> list[SimProcess] | None:
        for gpu in self.state.gpus:
            lists = [gpu.processes, *(ci.processes for gi in gpu.gpu_instances for ci in gi.compute_instances)]
            for processes in lists:
                if any(p.pid == pid for p in processes):
                    return processes
        return None

    def sim_detach_process(self, pid: int) -> None:
        processes = self._find_process(pid)
        if processes is None:
            raise sim_error(f"pid {pid} is not attached to any GPU of this node")
        processes[:] = [p for p in processes if p.pid != pid]

    def sim_set_client_attached(self, gpu_index: int, attached: bool) -> None:
        """A non-MIG client (nvidia-persistenced, dcgm, ...): blocks mode activation and reset."""
        self._sim_gpu(gpu_index).client_attached = attached

    def sim_set_reset_supported(self, gpu_index: int, supported: bool) -> None:
        """False models a pass-through VM: no GPU reset, so an Ampere mode change needs a reboot."""
        self._sim_gpu(gpu_index).reset_supported = supported

    def sim_set_ampere_auto_reset(self, gpu_index: int, enabled: bool) -> None:
        """See fake_nvml_mode: whether an idle Ampere GPU activates a mode change by itself."""
        self._sim_gpu(gpu_index).ampere_auto_reset = enabled

    def sim_set_gpu_instance_held(self, gpu_index: int, gi_id: int, held: bool) -> None:
        """A container still holding a GI's device nodes: destroy fails IN_USE (docs/nvml.md §9)."""
        gi = self._sim_gpu(gpu_index).gpu_instance(gi_id)
        if gi is None:
            raise sim_error(f"GPU {gpu_index} has no GPU instance with ID {gi_id}")
        gi.held_by_client = held

    def sim_set_one_slice_ci_beside_rev1(self, offered: bool) -> None:
        """Whether 1g double-memory GIs offer CI profile 1_SLICE beside 1_SLICE_REV1 (see SimNodeState)."""
        self.state.one_slice_ci_beside_rev1 = offered

    def sim_inject_fault(self, function: str, error: int, *, times: int | None = 1) -> None:
        """Make the next `times` calls of `function` (None: every call) raise NVMLError(error)
        before they have any effect."""
        self._faults.inject(function, error, times=times)

    def sim_clear_faults(self) -> None:
        self._faults.clear()


def _ci_by_uuid(gpu: SimGpu, uuid: str) -> SimComputeInstance | None:
    return next((ci for gi in gpu.gpu_instances for ci in gi.compute_instances if ci.uuid == uuid), None)
