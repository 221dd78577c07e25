"""What the apply engine needs from the world, as small protocols.

`NodeDriver` is the subset of `migagent.nvml.GpuDriver` the engine calls; naming it here lets tests
wrap the real driver (to crash it at step k, say) without subclassing it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol, runtime_checkable

from migagent.catalog.model import Placement
from migagent.layout.observed import Observation, ObservedGpu
from migagent.nvml.mode import ModeActivation


class NodeDriver(Protocol):
    def observe(self) -> Observation: ...

    def observe_gpu(self, index: int) -> ObservedGpu: ...

    def set_mig_mode(self, gpu: int, *, enabled: bool) -> ModeActivation: ...

    def reset_gpu(self, gpu: int) -> None: ...

    def create_gpu_instance(self, gpu: int, *, profile_id: int, placement: Placement) -> int: ...

    def create_compute_instance(
        self, gpu: int, *, gi_id: int, profile_id: int, placement: Placement | None = None
    ) -> int: ...

    def destroy_compute_instance(self, gpu: int, *, gi_id: int, ci_id: int) -> None: ...

    def destroy_gpu_instance(self, gpu: int, *, gi_id: int) -> None: ...


class RebootRequester(Protocol):
    def request_reboot(self, reason: str) -> None:
        """Ask the host to reboot (asynchronously); the engine returns right after asking."""
        ...


@runtime_checkable
class GroupReset(Protocol):
    """A driver that resets several GPUs in one command (`GpuDriver`)."""

    def reset_gpus(self, gpus: Sequence[int]) -> None: ...


@runtime_checkable
class NvmlSessions(Protocol):
    """A driver that holds NVML only inside sessions (`GpuDriver`): one session spans a whole apply."""

    def session(self) -> AbstractContextManager[None]: ...


def unit_of_work(driver: object) -> AbstractContextManager[None]:
    """The driver's NVML session around one unit of work; nothing for a driver without sessions."""
    return driver.session() if isinstance(driver, NvmlSessions) else nullcontext()
