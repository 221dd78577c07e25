"""GPU reset through `nvidia-smi -r -i <bus id>[,<bus id>...]` (NVML has no public reset call; docs/nvml.md §3).

GPUs that must reset together (NVLink peers; every GPU a plan resets) go in one command, as
mig-parted does; `-i` takes a comma-separated list.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from migagent.errors import InUseError, NotSupportedError, PermanentError, TransientError

RESET_TIMEOUT_S = 120.0
_RETRY_AFTER_TIMEOUT_S = 30.0


class ResetRunner(Protocol):
    def reset(self, pci_bus_id: str) -> None:
        """Reset one GPU; raises NotSupportedError / InUseError / PermanentError."""


@runtime_checkable
class GroupResetRunner(Protocol):
    def reset_together(self, pci_bus_ids: Sequence[str]) -> None:
        """Reset these GPUs in one command; raises like `reset`."""


class CompletedProcessLike(Protocol):
    @property
    def returncode(self) -> int: ...
    @property
    def stdout(self) -> str | None: ...
    @property
    def stderr(self) -> str | None: ...


RunCommand = Callable[[Sequence[str]], CompletedProcessLike]


def run_command(argv: Sequence[str]) -> CompletedProcessLike:
    """Run `argv` with captured text output and a bounded wait (the production `run`)."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=RESET_TIMEOUT_S, check=False)


class NvidiaSmiResetRunner:
    def __init__(self, *, run: RunCommand = run_command, nvidia_smi: str = "nvidia-smi") -> None:
        self._run = run
        self._nvidia_smi = nvidia_smi

    def reset(self, pci_bus_id: str) -> None:
        self.reset_together([pci_bus_id])

    def reset_together(self, pci_bus_ids: Sequence[str]) -> None:
        pci_bus_id = ",".join(pci_bus_ids)
        argv = [self._nvidia_smi, "-r", "-i", pci_bus_id]
        command = " ".join(argv)
        try:
            result = self._run(argv)
        except subprocess.TimeoutExpired as exc:
            raise TransientError(
                f"GPU {pci_bus_id}: `{command}` did not finish in {exc.timeout:g}s; re-observe before retrying",
                delay=_RETRY_AFTER_TIMEOUT_S,
            ) from exc
        except OSError as exc:
            raise PermanentError(f"GPU {pci_bus_id}: cannot run `{command}`: {exc}") from exc
        if result.returncode != 0:
            raise _classify_failure(pci_bus_id, command=command, result=result)


def _classify_failure(pci_bus_id: str, *, command: str, result: CompletedProcessLike) -> PermanentError:
    output = " ".join(part.strip() for part in (result.stdout, result.stderr) if part and part.strip())
    message = f"GPU {pci_bus_id}: `{command}` failed (exit {result.returncode}): {output or 'no output'}"
    lowered = output.lower()
    # "In use by another client" / "...because it's being used by some other process" -> InUse.
    if "in use" in lowered or "being used" in lowered:
        return InUseError(message + " (stop the processes and clients holding the GPU, then retry)")
    # "Resetting GPU ... is not supported" (cloud VMs, pass-through): only a reboot helps.
    if "not supported" in lowered:
        return NotSupportedError(message + " (reboot the node to apply the change)")
    return PermanentError(message)
