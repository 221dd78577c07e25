"""Seams around the GPU driver: a NodeDriver that calls back before and after each NVML mutation,
and one that "crashes" (raises SimulatedCrash, a BaseException nothing catches) at a chosen one."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from migagent.catalog.model import Placement
from migagent.layout.observed import Observation, ObservedGpu
from migagent.nvml.mode import ModeActivation
from migagent.reconcile.ports import NodeDriver

T = TypeVar("T")


class SimulatedCrash(BaseException):
    """The process died here."""


class InterceptingDriver:
    """A NodeDriver delegating to another, calling `before(name)` and `after(name)` around each mutation."""

    def __init__(
        self,
        driver: NodeDriver,
        *,
        before: Callable[[str], None] = lambda name: None,
        after: Callable[[str], None] = lambda name: None,
    ) -> None:
        self._driver = driver
        self._before = before
        self._after = after

    def observe(self) -> Observation:
        return self._driver.observe()

    def observe_gpu(self, index: int) -> ObservedGpu:
        return self._driver.observe_gpu(index)

    def _mutate(self, name: str, call: Callable[[], T]) -> T:
        self._before(name)
        result = call()
        self._after(name)
        return result

    def set_mig_mode(self, gpu: int, *, enabled: bool) -> ModeActivation:
        return self._mutate("set_mig_mode", lambda: self._driver.set_mig_mode(gpu, enabled=enabled))

    def reset_gpu(self, gpu: int) -> None:
        self._mutate("reset_gpu", lambda: self._driver.reset_gpu(gpu))

    def create_gpu_instance(self, gpu: int, *, profile_id: int, placement: Placement) -> int:
        return self._mutate(
            "create_gpu_instance",
            lambda: self._driver.create_gpu_instance(gpu, profile_id=profile_id, placement=placement),
        )

    def create_compute_instance(
        self, gpu: int, *, gi_id: int, profile_id: int, placement: Placement | None = None
    ) -> int:
        return self._mutate(
            "create_compute_instance",
            lambda: self._driver.create_compute_instance(gpu, gi_id=gi_id, profile_id=profile_id, placement=placement),
        )

    def destroy_compute_instance(self, gpu: int, *, gi_id: int, ci_id: int) -> None:
        self._mutate(
            "destroy_compute_instance", lambda: self._driver.destroy_compute_instance(gpu, gi_id=gi_id, ci_id=ci_id)
        )

    def destroy_gpu_instance(self, gpu: int, *, gi_id: int) -> None:
        self._mutate("destroy_gpu_instance", lambda: self._driver.destroy_gpu_instance(gpu, gi_id=gi_id))


def crashing_driver(driver: NodeDriver, *, crash_at: int, after_call: bool) -> InterceptingDriver:
    """A driver that dies at mutation number `crash_at` (0-based): before NVML runs it, or right after
    NVML did it but before the engine could journal it."""
    done = 0

    def before(name: str) -> None:
        if done == crash_at and not after_call:
            raise SimulatedCrash(f"before {name} #{crash_at}")

    def after(name: str) -> None:
        nonlocal done
        done += 1
        if done - 1 == crash_at and after_call:
            raise SimulatedCrash(f"after {name} #{crash_at}")

    return InterceptingDriver(driver, before=before, after=after)
