"""Fault injection: make a named call fail with an NVML error, once, n times or always."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import pynvml

from migagent.sim.handles import nvml_error


@dataclass
class _Fault:
    error: int
    remaining: int | None  # None = every call until cleared


class FaultInjector:
    def __init__(self, functions: Collection[str]) -> None:
        self._functions = frozenset(functions)
        self._faults: dict[str, _Fault] = {}

    def inject(self, function: str, error: int, *, times: int | None = 1) -> None:
        if function not in self._functions:
            raise ValueError(
                f"cannot inject a fault into {function!r}: not a simulated call;"
                f" valid calls: {', '.join(sorted(self._functions))}"
            )
        try:
            pynvml.nvmlExceptionClass(error)
        except ValueError as exc:
            raise ValueError(f"error {error!r} is not an NVML_ERROR_* code known to pynvml") from exc
        if times is not None and times < 1:
            raise ValueError(f"times must be at least 1 (or None for always), got {times}")
        self._faults[function] = _Fault(error, times)

    def clear(self) -> None:
        self._faults.clear()

    def check(self, function: str) -> None:
        """Raise the injected error for `function`, if any, consuming one of its repetitions."""
        fault = self._faults.get(function)
        if fault is None:
            return
        if fault.remaining is not None:
            fault.remaining -= 1
            if fault.remaining == 0:
                del self._faults[function]
        raise nvml_error(fault.error)
