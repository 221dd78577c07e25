"""pynvml's ctypes calling conventions, from the callee's side, plus the fake's handle table.

Handles are pynvml's own pointer types (`c_nvmlDevice_t`, ...) holding fake addresses that are
never dereferenced; the table maps an address back to what it names. Outputs are written into
the caller's ctypes objects exactly where real NVML would write them.
"""

from __future__ import annotations

import ctypes
import enum
import itertools
from dataclasses import dataclass
from typing import Any

import pynvml

# Fake addresses are unique across every FakeNvml in the process, so a handle from one fake (or
# from before a reset) can never alias a live object of another.
_ADDRESSES = itertools.count(0x7E57_0000_1000, 0x10)


def nvml_error(code: int) -> BaseException:
    """pynvml's own exception for `code` (NVMLError(code) maps to the NVMLError_* subclass)."""
    error: BaseException = pynvml.NVMLError(code)
    return error


class HandleKind(enum.Enum):
    DEVICE = "device"
    MIG_DEVICE = "mig-device"
    GPU_INSTANCE = "gpu-instance"
    COMPUTE_INSTANCE = "compute-instance"


@dataclass(frozen=True)
class HandleTarget:
    """What a handle names: a GPU by index, and for instance handles the GI/CI IDs on it."""

    kind: HandleKind
    gpu: int
    gi_id: int = -1
    ci_id: int = -1


_POINTER_TYPES: dict[HandleKind, Any] = {
    HandleKind.DEVICE: pynvml.c_nvmlDevice_t,
    HandleKind.MIG_DEVICE: pynvml.c_nvmlDevice_t,
    HandleKind.GPU_INSTANCE: pynvml.c_nvmlGpuInstance_t,
    HandleKind.COMPUTE_INSTANCE: pynvml.c_nvmlComputeInstance_t,
}


class HandleTable:
    """Live handles only: forgetting a target makes every copy of its handle INVALID_ARGUMENT."""

    def __init__(self) -> None:
        self._targets: dict[int, HandleTarget] = {}
        self._addresses: dict[HandleTarget, int] = {}

    def handle(self, target: HandleTarget) -> Any:
        address = self._addresses.get(target)
        if address is None:
            address = next(_ADDRESSES)
            self._addresses[target] = address
            self._targets[address] = target
        return ctypes.cast(ctypes.c_void_p(address), _POINTER_TYPES[target.kind])

    def resolve(self, handle: Any) -> HandleTarget:
        """The target of a live handle; INVALID_ARGUMENT for NULL, foreign, stale or non-handles."""
        target = self._targets.get(address_of(handle) or 0)
        if target is None:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return target

    def forget(self, target: HandleTarget) -> None:
        address = self._addresses.pop(target, None)
        if address is not None:
            del self._targets[address]

    def forget_gpu(self, gpu: int) -> None:
        for target in [t for t in self._addresses if t.gpu == gpu]:
            self.forget(target)

    def forget_all(self) -> None:
        self._targets.clear()
        self._addresses.clear()


def address_of(handle: Any) -> int | None:
    try:
        value: int | None = ctypes.cast(handle, ctypes.c_void_p).value
    except (ctypes.ArgumentError, TypeError):
        return None
    return value


def read_count(count_ref: Any) -> int:
    value = getattr(_pointee(count_ref), "value", None)
    if not isinstance(value, int):
        raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    return value


def write_count(count_ref: Any, count: int) -> None:
    target = _pointee(count_ref)
    if not hasattr(target, "value"):
        raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    target.value = count


def _pointee(ref: Any) -> Any:
    """What a C pointer parameter points to: `byref(x)`, `pointer(x)`, or an array (which decays to a
    pointer). pynvml forwards these arguments untouched, so a bare structure or `c_uint` would reach
    the C library by value, where a pointer is expected: refused, as the library cannot read it."""
    obj = getattr(ref, "_obj", None)
    if obj is not None:
        return obj
    if isinstance(ref, ctypes._Pointer):
        return ref.contents
    if isinstance(ref, ctypes.Array):
        return ref
    raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)


def read_placement(placement: Any) -> tuple[int, int]:
    """Accept `byref()`/`pointer()` of a `c_nvmlGpuInstancePlacement_t`; by value is refused (docs/nvml.md §3)."""
    target = _pointee(placement)
    start, size = getattr(target, "start", None), getattr(target, "size", None)
    if not isinstance(start, int) or not isinstance(size, int):
        raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    return start, size


def fill_array(array_ref: Any, count_ref: Any, items: list[Any]) -> None:
    """The caller-allocated-array convention: None => count only; too small => INSUFFICIENT_SIZE.

    The array's own length is its capacity (nvml.h treats `count` as output only, and go-nvml
    passes 0); for a bare pointer the count passed in is taken as the capacity.
    """
    if array_ref is None:
        write_count(count_ref, len(items))
        return
    array = _pointee(array_ref)
    capacity = len(array) if isinstance(array, ctypes.Array) else read_count(count_ref)
    if capacity < len(items):
        write_count(count_ref, len(items))
        raise nvml_error(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
    try:
        for index, item in enumerate(items):
            array[index] = item
    except TypeError as exc:  # an array of the wrong element type
        raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT) from exc
    write_count(count_ref, len(items))


def fill_handle_array(array_ref: Any, count_ref: Any, handles: list[Any]) -> None:
    """GI/CI handle lists (nvmlDeviceGetGpuInstances, nvmlGpuInstanceGetComputeInstances): the array
    is required (nvml.h: INVALID_ARGUMENT for an invalid one; NULL is no count query here)."""
    if array_ref is None:
        raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    fill_array(array_ref, count_ref, handles)
