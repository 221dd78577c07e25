"""What every part of FakeNvml shares: state, handle table, faults, init refcount, and lookups."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

import pynvml

from migagent.catalog import GiProfile, GpuModel, MediaAttribute, model_by_key
from migagent.layout.profile import ci_profile_name
from migagent.sim.faults import FaultInjector
from migagent.sim.handles import HandleKind, HandleTable, HandleTarget, nvml_error
from migagent.sim.state import (
    MIG_ENABLE,
    SimComputeInstance,
    SimGpu,
    SimGpuInstance,
    SimNodeState,
    SimProcess,
)

_API_MARK = "_fake_nvml_api"
NO_INSTANCE_ID = 0xFFFFFFFF  # gpuInstanceId/computeInstanceId of a process when MIG is off (nvml.h)

CoreT = TypeVar("CoreT", bound="FakeCore")
MutationHook = Callable[[str], None]
P = ParamSpec("P")
R = TypeVar("R")


def nvml_api(
    *, mutates: bool = False, needs_init: bool = True
) -> Callable[[Callable[Concatenate[CoreT, P], R]], Callable[Concatenate[CoreT, P], R]]:
    """Mark a pynvml-named method: injected faults fire first (before any effect), then the
    nvmlInit check; successful mutating calls are appended to `sim_mutations` and then reported to
    every hook added with `sim_after_each_mutation`."""

    def decorate(fn: Callable[Concatenate[CoreT, P], R]) -> Callable[Concatenate[CoreT, P], R]:
        name = fn.__name__

        @functools.wraps(fn)
        def call(self: CoreT, /, *args: P.args, **kwargs: P.kwargs) -> R:
            self._faults.check(name)
            if needs_init and self._init_count == 0:
                raise nvml_error(pynvml.NVML_ERROR_UNINITIALIZED)
            result = fn(self, *args, **kwargs)
            if mutates:
                self._mutated(name)
            return result

        setattr(call, _API_MARK, True)
        return call

    return decorate


def api_function_names(cls: type) -> tuple[str, ...]:
    return tuple(sorted(n for n in dir(cls) if getattr(getattr(cls, n, None), _API_MARK, False)))


def sim_error(message: str) -> ValueError:
    """Bad input to a `sim_*` control (not an NVML call, so not an NVMLError)."""
    return ValueError(message)


class FakeCore:
    """State and lookups; the pynvml surface lives in the mixins that FakeNvml combines."""

    def __init__(self, state: SimNodeState, *, models: Mapping[str, GpuModel] | None = None) -> None:
        self.state = state
        self.sim_mutations: list[str] = []
        self._extra_models = dict(models or {})
        self._models = [self._resolve_model(gpu.model_key) for gpu in state.gpus]
        self._handles = HandleTable()
        self._faults = FaultInjector((*api_function_names(type(self)), "sim_reset_gpu"))
        self._init_count = 0
        self._mutation_hooks: list[MutationHook] = []

    def sim_after_each_mutation(self, hook: MutationHook) -> None:
        """Call `hook(name)` after every successful mutating NVML call (and simulated reset or reboot),
        in the order hooks were added: e.g. persist the node, as real GPUs never forget a change."""
        self._mutation_hooks.append(hook)

    def _mutated(self, name: str) -> None:
        self.sim_mutations.append(name)
        self._notify_mutation_hooks(name)

    def _notify_mutation_hooks(self, name: str) -> None:
        for hook in self._mutation_hooks:
            hook(name)

    @property
    def sim_nvml_clients(self) -> int:
        """How many nvmlInit calls are not yet balanced by nvmlShutdown (NVML's reference count)."""
        return self._init_count

    def _resolve_model(self, key: str) -> GpuModel:
        return self._extra_models[key] if key in self._extra_models else model_by_key(key)

    # --- GPUs -------------------------------------------------------------------------------
    def model(self, gpu_index: int) -> GpuModel:
        return self._models[gpu_index]

    def _sim_gpu(self, gpu_index: int) -> SimGpu:
        if not 0 <= gpu_index < len(self.state.gpus):
            raise sim_error(f"no GPU with index {gpu_index}; this node has GPUs 0..{len(self.state.gpus) - 1}")
        return self.state.gpus[gpu_index]

    def _device_handle(self, gpu_index: int) -> Any:
        return self._handles.handle(HandleTarget(HandleKind.DEVICE, gpu_index))

    def _target(self, handle: Any, *kinds: HandleKind) -> HandleTarget:
        target = self._handles.resolve(handle)
        if target.kind not in kinds:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return target

    def _physical(self, device: Any) -> tuple[int, SimGpu]:
        """A physical GPU handle; a MIG or instance handle is INVALID_ARGUMENT."""
        target = self._target(device, HandleKind.DEVICE)
        return target.gpu, self.state.gpus[target.gpu]

    @staticmethod
    def _all_processes(gpu: SimGpu) -> list[SimProcess]:
        on_mig_devices = (p for gi in gpu.gpu_instances for ci in gi.compute_instances for p in ci.processes)
        return [*gpu.processes, *on_mig_devices]

    @staticmethod
    def _mig_enabled(gpu: SimGpu) -> bool:
        return gpu.mig_current == MIG_ENABLE

    def _require_mig_enabled(self, gpu: SimGpu) -> None:
        if not self._mig_enabled(gpu):
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)

    # --- instances --------------------------------------------------------------------------
    def _gi_profile(self, gpu_index: int, gi: SimGpuInstance) -> GiProfile:
        profile = self.model(gpu_index).profiles.gi_profile(gi.profile_id)
        if profile is None:  # only a hand-edited state file can get here
            raise nvml_error(pynvml.NVML_ERROR_UNKNOWN)
        return profile

    def _gpu_instance(self, handle: Any) -> tuple[int, SimGpuInstance]:
        target = self._target(handle, HandleKind.GPU_INSTANCE)
        gi = self.state.gpus[target.gpu].gpu_instance(target.gi_id)
        if gi is None:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return target.gpu, gi

    def _compute_instance(
        self, handle: Any, kind: HandleKind = HandleKind.COMPUTE_INSTANCE
    ) -> tuple[int, SimGpuInstance, SimComputeInstance]:
        target = self._target(handle, kind)
        gi = self.state.gpus[target.gpu].gpu_instance(target.gi_id)
        ci = gi.compute_instance(target.ci_id) if gi is not None else None
        if gi is None or ci is None:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return target.gpu, gi, ci

    def _gi_handle(self, gpu_index: int, gi: SimGpuInstance) -> Any:
        return self._handles.handle(HandleTarget(HandleKind.GPU_INSTANCE, gpu_index, gi.id))

    def _ci_handle(self, gpu_index: int, gi: SimGpuInstance, ci: SimComputeInstance) -> Any:
        return self._handles.handle(HandleTarget(HandleKind.COMPUTE_INSTANCE, gpu_index, gi.id, ci.id))

    def _mig_handle(self, gpu_index: int, gi: SimGpuInstance, ci: SimComputeInstance) -> Any:
        return self._handles.handle(HandleTarget(HandleKind.MIG_DEVICE, gpu_index, gi.id, ci.id))

    def _forget_ci(self, gpu_index: int, gi: SimGpuInstance, ci: SimComputeInstance) -> None:
        for kind in (HandleKind.COMPUTE_INSTANCE, HandleKind.MIG_DEVICE):
            self._handles.forget(HandleTarget(kind, gpu_index, gi.id, ci.id))

    def _forget_gi(self, gpu_index: int, gi: SimGpuInstance) -> None:
        for ci in gi.compute_instances:
            self._forget_ci(gpu_index, gi, ci)
        self._handles.forget(HandleTarget(HandleKind.GPU_INSTANCE, gpu_index, gi.id))

    @staticmethod
    def _mig_devices(gpu: SimGpu) -> list[tuple[SimGpuInstance, SimComputeInstance]]:
        """One MIG device per CI, indexed in ascending (GI ID, CI ID) order (docs/nvml.md §10)."""
        pairs = [(gi, ci) for gi in gpu.gpu_instances for ci in gi.compute_instances]
        return sorted(pairs, key=lambda pair: (pair[0].id, pair[1].id))

    def _ci_name(self, gpu_index: int, gi: SimGpuInstance, ci: SimComputeInstance) -> str:
        """`1c.3g.20gb` / `3g.20gb`; a `+me` GI's CI is reported without `+me` [obs C3]."""
        gi_profile = self._gi_profile(gpu_index, gi)
        ci_profile = gi_profile.ci_profile(ci.profile_id)
        if ci_profile is None:  # only a hand-edited state file can get here
            raise nvml_error(pynvml.NVML_ERROR_UNKNOWN)
        return ci_profile_display_name(self.model(gpu_index), gi_profile, ci_profile.id)


def ci_profile_display_name(model: GpuModel, gi_profile: GiProfile, ci_profile_id: int) -> str:
    ci_profile = gi_profile.ci_profile(ci_profile_id)
    if ci_profile is None:
        raise KeyError(ci_profile_id)
    name = ci_profile_name(gi_profile, ci_profile, model.profiles)
    return str(dataclasses.replace(name, media=MediaAttribute.NONE))
