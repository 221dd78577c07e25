"""The simulator's GPU reset runner: what `nvidia-smi -r -i <bus>` is in production."""

from __future__ import annotations

from collections.abc import Sequence

import pynvml

from migagent.errors import InUseError, NotSupportedError, PermanentError, TransientError
from migagent.sim.fake_nvml import FakeNvml


class SimResetRunner:
    """Resets a simulated GPU, raising migagent's error classes like the real runner does."""

    def __init__(self, fake: FakeNvml) -> None:
        self._fake = fake

    def reset_together(self, pci_bus_ids: Sequence[str]) -> None:
        """nvidia-smi -r -i A,B: each GPU in turn."""
        for pci_bus_id in pci_bus_ids:
            self.reset(pci_bus_id)

    def reset(self, pci_bus_id: str) -> None:
        try:
            self._fake.sim_reset_gpu(pci_bus_id)
        except pynvml.NVMLError_InUse as exc:
            clients = self._fake.sim_nvml_clients
            held = f" (NVML is initialised {clients} time(s) in this process)" if clients else ""
            raise InUseError(
                f"cannot reset GPU {pci_bus_id}: a process or NVML client is using it{held}; nvidia-smi -r"
                " refuses while any NVML client, the caller included, holds the GPU"
            ) from exc
        except pynvml.NVMLError_NotSupported as exc:
            raise NotSupportedError(
                f"cannot reset GPU {pci_bus_id}: reset is not supported here (pass-through VM?); reboot instead"
            ) from exc
        except (pynvml.NVMLError_Timeout, pynvml.NVMLError_NotReady) as exc:
            # nvidia-smi's own timeout is retried in production (NvidiaSmiResetRunner); the same here.
            raise TransientError(f"cannot reset GPU {pci_bus_id} yet: {exc}", delay=5.0) from exc
        except pynvml.NVMLError as exc:
            raise PermanentError(f"cannot reset GPU {pci_bus_id}: {exc}") from exc
