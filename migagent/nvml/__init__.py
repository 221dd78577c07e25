"""The only package that knows pynvml: `GpuDriver` over the `NvmlLib` function surface."""

from __future__ import annotations

from migagent.nvml.driver import GpuDriver
from migagent.nvml.errors import classify, nvml_call
from migagent.nvml.lib import NvmlLib
from migagent.nvml.mode import ModeActivation
from migagent.nvml.reset import NvidiaSmiResetRunner, ResetRunner

__all__ = [
    "GpuDriver",
    "ModeActivation",
    "NvidiaSmiResetRunner",
    "NvmlLib",
    "ResetRunner",
    "classify",
    "nvml_call",
]
