"""The `nvidia-smi` of the node behind the fake libnvidia-ml.so.1: `-r -i <bus id>[,...]`, `-L`, and
the summary (no option).

Installed next to the library by scripts/build_fake_nvml.sh as `nvidia-smi`, so the real-GPU
code path (NvidiaSmiResetRunner, mig-parted's reset of Ampere GPUs) resets simulated GPUs, and
mig-manager's reconfigure-mig.sh finds the summary it runs. Like the real tool the reset refuses
while another process holds NVML initialised (mig-parted shuts NVML down before resetting for
this reason) or runs on the GPU. Other options are refused (exit 2).
Exit codes follow nvidia-smi's man page table, which reuses NVML's codes [?: the code for a
GPU in use is not documented; NVML's IN_USE (19) is used].
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import pynvml

from migagent_sim.fakelib.node import NodeConfigError, node_from_environment
from migagent_sim.fakelib.nvidia_smi_report import gpu_list, summary

_OTHER_ERROR = 255


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nvidia-smi", description="simulated nvidia-smi: the summary, -L, and -r -i <pci bus id> (GPU reset)"
    )
    parser.add_argument("-r", "--gpu-reset", action="store_true", help="reset the GPUs named by -i")
    parser.add_argument("-L", "--list-gpus", action="store_true", help="list the GPUs and MIG devices")
    parser.add_argument("-i", "--id", help="PCI bus id(s) of the GPU(s), comma-separated, e.g. 00000000:18:00.0")
    return parser


class _ResetRefusedError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _in_use(bus_id: str, detail: str) -> _ResetRefusedError:
    return _ResetRefusedError(
        f"GPU {bus_id} is currently in use by another process ({detail}).\n\n"
        "1 device is currently being used by one or more other processes (e.g., Fabric Manager, CUDA "
        "application, graphics application such as an X server, or a monitoring application such as "
        "another instance of nvidia-smi). Please first kill all processes using this device and all "
        "compute applications running in the system.",
        int(pynvml.NVML_ERROR_IN_USE),
    )


def _refusal(bus_id: str, exc: pynvml.NVMLError) -> _ResetRefusedError:
    if isinstance(exc, pynvml.NVMLError_InUse):
        return _in_use(bus_id, "compute processes or a client on the GPU")
    if isinstance(exc, pynvml.NVMLError_NotSupported):
        return _ResetRefusedError(f"Resetting GPU {bus_id} is not supported.", int(pynvml.NVML_ERROR_NOT_SUPPORTED))
    if isinstance(exc, pynvml.NVMLError_NotFound | pynvml.NVMLError_InvalidArgument):
        return _ResetRefusedError(f"No GPU with PCI bus id {bus_id} was found.", int(pynvml.NVML_ERROR_NOT_FOUND))
    return _ResetRefusedError(f"Unable to reset GPU {bus_id}: {exc}", _OTHER_ERROR)


def _reset(bus_ids: str) -> None:
    """`-i A,B,...` resets every listed GPU in one run, as mig-parted asks the real tool to."""
    bus_id = bus_ids
    try:
        node = node_from_environment()
        with node.session("reset") as fake:
            holders = node.clients.live(exclude=os.getpid())
            if holders:
                raise _in_use(bus_ids, f"NVML clients: pids {', '.join(map(str, holders))}")
            for bus_id in bus_ids.split(","):
                fake.sim_reset_gpu(bus_id.strip())
    except NodeConfigError as exc:
        raise _ResetRefusedError(f"nvidia-smi (simulated): {exc}", int(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)) from exc
    except pynvml.NVMLError as exc:
        raise _refusal(bus_id, exc) from exc


def _report(list_gpus: bool) -> int:
    try:
        with node_from_environment().session("read") as fake:
            fake.nvmlInit()
            try:
                print(gpu_list(fake) if list_gpus else summary(fake))
            finally:
                fake.nvmlShutdown()
    except NodeConfigError as exc:
        print(f"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver: {exc}", file=sys.stderr)
        return int(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.gpu_reset:
        return _report(args.list_gpus)
    if args.id is None:
        parser.error("-r needs -i <pci bus id>")
    bus_id = str(args.id)
    try:
        _reset(bus_id)
    except _ResetRefusedError as refused:
        print(refused, file=sys.stderr)
        return refused.code
    print(f"GPU {bus_id} was successfully reset.\nAll done.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
